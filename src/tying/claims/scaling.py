"""The scaling sweep's table: every cell's claims beside the cell's size and token budget.

Input: each cell's claims table (tying.claims.verdicts.claims_table, one pair per cell) and the cells'
facts (tying.plan.grid). Output: one row per (cell, claim), cells in grid order and claims in
claims.CLAIMS order, with the statistic's mean, Student-t interval, seeds and verdict carried
over unchanged, and the chance level as a number: the mean of the per-seed chance values when the
cell's seed table (claims.seed_table) is given, else the claims table's chance text (3 decimals).
A claims table with comparable-token rows (token_set "drawn >= N", tying.claims.exposure) keeps them beside
each all-token row, so a trend can be read on the same exposure in every cell.

Exposure (`exposure_by_cell`): each cell's claims by exposure stratum (tying.claims.exposure.exposure_table) in
one table beside the cell's size and budget, so a trend can be read within one stratum of draws.

Trends (`paired_trends`): cells that differ in one factor (the next token budget at one size, the next
size at one budget) share their seeds' data order, so each claim's change from one cell to the other is
taken per seed, cell minus cell, and its mean gets a Student-t 95% interval over the shared seeds.
"""

import pandas as pd

from tying.claims.definitions import ALL_TOKENS, CLAIMS
from tying.claims.exposure import TABLE_COLUMNS
from tying.errors import PipelineError
from tying.frames import markdown, write_table
from tying.io import atomic_path
from tying.plan.grid import SHAPE_COLUMNS
from tying.stats import format_cell, mean_ci

COLUMNS = [
    "cell",
    "hidden_size",
    "layers",
    "steps",
    "tokens",
    "params",
    "embedding_share",
    "claim",
    "token_set",
    "ours",
    "mean",
    "ci_low",
    "ci_high",
    "n_seeds",
    "verdict",
    "chance",
    "paper_value",
]
CARRIED = ["claim", "token_set", "mean", "ci_low", "ci_high", "n_seeds", "verdict", "paper_value"]
EXPOSURE_COLUMNS = SHAPE_COLUMNS + [c for c in TABLE_COLUMNS if c not in ("pair", "draws_low", "draws_high")]
TREND_COLUMNS = [
    "factor",
    "from_cell",
    "to_cell",
    "claim",
    "token_set",
    "change",
    "mean",
    "ci_low",
    "ci_high",
    "n_seeds",
    "trend",
]


def scaling_table(claims, cell_facts, seeds=None):
    """The tidy scaling table (COLUMNS) from {cell: claims table}, the cells' facts (one row per
    cell, tying.plan.grid.Cell.facts: cell, hidden_size, layers, steps, tokens, params, embedding_share, ...) and
    optionally {cell: seed table}. A claims table with a pair column contributes its rows of the pair named after the
    cell. `ours` is the mean [interval] as text, the Markdown's view of mean, ci_low and ci_high."""
    facts = cell_facts.set_index("cell")
    missing = sorted(set(facts.index) - set(claims))
    if missing:
        raise PipelineError(f"scaling table: no claims table for cells {missing}")
    frames = []
    for cell in facts.index:
        table = claims[cell]
        if "pair" in table.columns:
            table = table[table["pair"] == cell]
        if table.empty:
            raise PipelineError(f"scaling table: cell {cell}'s claims table has no rows (of pair {cell})")
        table = _with_token_set(table)
        rows = table[CARRIED].copy()
        rows["chance"] = _chance(table, None if seeds is None else seeds.get(cell))
        for column in COLUMNS[:7]:
            rows[column] = cell if column == "cell" else facts.loc[cell, column]
        frames.append(rows)
    out = pd.concat(frames, ignore_index=True)
    out["ours"] = [format_cell(*r) for r in zip(out["mean"], out["ci_low"], out["ci_high"])]
    rank = {
        "claim": {c: i for i, c in enumerate(CLAIMS)},
        "cell": {cell: i for i, cell in enumerate(facts.index)},
        "token_set": {ALL_TOKENS: 0},
    }
    out = out.sort_values(["cell", "claim", "token_set"], key=lambda c: c.map(rank[c.name]).fillna(1), kind="stable")
    return out[COLUMNS].reset_index(drop=True)


def neighbours(cell_facts):
    """(factor, from cell, to cell) of each pair of cells one step apart on one axis: the next token budget
    at the same size ("tokens"), the next size at the same budget ("size")."""
    facts = cell_facts.reset_index(drop=True)
    size = list(zip(facts["hidden_size"], facts["layers"]))
    sizes, budgets = list(dict.fromkeys(size)), sorted(set(facts["steps"]))
    where = {(sz, st): c for sz, st, c in zip(size, facts["steps"], facts["cell"])}
    out = [
        ("tokens", where[sz, a], where[sz, b])
        for sz in sizes
        for a, b in zip(budgets, budgets[1:])
        if (sz, a) in where and (sz, b) in where
    ]
    out += [
        ("size", where[a, st], where[b, st])
        for st in budgets
        for a, b in zip(sizes, sizes[1:])
        if (a, st) in where and (b, st) in where
    ]
    return out


def paired_trends(seeds, cell_facts):
    """Each claim's change between neighbouring cells (neighbours), paired by seed -> TREND_COLUMNS rows:
    mean [Student-t 95% interval] of (to - from) over the seeds both cells have, per token set, and the
    trend: "up" / "down" when the interval excludes 0, "unclear" when it does not, "direction only" below
    3 seeds. seeds: {cell: seed table (claim, seed, value, optional token_set)}."""
    rows = []
    for factor, low, high in neighbours(cell_facts):
        a, b = (_with_token_set(seeds[c]) for c in (low, high))
        joined = a.merge(b, on=["claim", "token_set", "seed"], suffixes=("_from", "_to"))
        for (claim, token_set), group in joined.groupby(["claim", "token_set"], sort=False):
            diff = (group["value_to"] - group["value_from"]).dropna()
            mean, ci_low, ci_high = mean_ci(diff)
            trend = "direction only" if len(diff) < 3 else "up" if ci_low > 0 else "down" if ci_high < 0 else "unclear"
            rows.append(
                {
                    "factor": factor,
                    "from_cell": low,
                    "to_cell": high,
                    "claim": claim,
                    "token_set": token_set,
                    "change": format_cell(mean, ci_low, ci_high),
                    "mean": mean,
                    "ci_low": ci_low,
                    "ci_high": ci_high,
                    "n_seeds": len(diff),
                    "trend": trend,
                }
            )
    out = pd.DataFrame(rows, columns=TREND_COLUMNS)
    rank = {"claim": {c: i for i, c in enumerate(CLAIMS)}, "token_set": {ALL_TOKENS: 0}}
    return out.sort_values(
        ["factor", "from_cell", "claim", "token_set"],
        kind="stable",
        key=lambda c: c.map(rank[c.name]).fillna(1) if c.name in rank else c,
    ).reset_index(drop=True)


def exposure_by_cell(tables, cell_facts):
    """Every cell's claims by exposure ({cell: exposure_table frame}) as one frame: the cell's size and steps
    (SHAPE_COLUMNS), then its rows in their own order (claims, strata; `tokens` the stratum's), cells in grid
    order."""
    facts = cell_facts.set_index("cell")
    missing = sorted(set(facts.index) - set(tables))
    if missing:
        raise PipelineError(f"scaling exposure table: no claims by exposure for cells {missing}")
    frames = [
        tables[cell].drop(columns="pair").assign(cell=cell, **facts.loc[cell, SHAPE_COLUMNS[1:]])
        for cell in facts.index
    ]
    out = pd.concat(frames, ignore_index=True)
    return out[SHAPE_COLUMNS + [c for c in out.columns if c not in SHAPE_COLUMNS]]


def write_scaling(table, csv_path, md_path, trends=None, trends_csv=None):
    """results/tables/scaling.csv (every column) and scaling.md (all but mean, ci_low, ci_high, which
    `ours` shows); `trends` (paired_trends) to `trends_csv` and as the Markdown's second table."""
    notes = ""
    if trends is not None:
        with atomic_path(trends_csv) as tmp:
            trends.to_csv(tmp, index=False)
        notes = (
            "\nPaired trends between neighbouring cells (to minus from, per seed; Student-t 95% over the "
            "shared seeds):\n\n"
            + markdown(trends, [c for c in TREND_COLUMNS if c not in ("mean", "ci_low", "ci_high")])
        )
    write_table(table, csv_path, md_path, notes=notes)


def _chance(table, seeds):
    """Each row's chance level as a number (NaN where the claim has none): the seeds' mean chance where the
    seed table has the row's claim and token set, else the claims table's chance text."""
    text = pd.to_numeric(table["chance"].replace("", None), errors="coerce")
    if seeds is None:
        return text.to_numpy()
    seeds = _with_token_set(seeds)
    means = seeds.groupby(["claim", "token_set"])["chance"].apply(pd.Series.mean)  # Series.mean, as claims_table
    keys = pd.MultiIndex.from_arrays([table["claim"], table["token_set"]])
    return means.reindex(keys).to_numpy()


def _with_token_set(frame):
    """`frame` with a token_set column: its own, or "all analysed" for a table without comparable-token rows."""
    return frame if "token_set" in frame.columns else frame.assign(token_set=ALL_TOKENS)

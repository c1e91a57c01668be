"""The scaling sweep's table (issue 21): every cell's claims beside the cell's size and token budget.

Input: each cell's claims table (tying.claims.claims_table, one pair per cell) and the cells'
facts (tying.grid). Output: one row per (cell, claim), cells in grid order and claims in
claims.CLAIMS order, with the statistic's mean, Student-t interval, seeds and verdict carried
over unchanged, and the chance level as a number: the mean of the per-seed chance values when the
cell's seed table (claims.seed_table) is given, else the claims table's chance text (3 decimals).
"""
import pandas as pd

from tying.claims import CLAIMS
from tying.errors import PipelineError
from tying.stats import format_cell
from tying.tables import write_table

COLUMNS = ["cell", "hidden_size", "layers", "steps", "tokens", "params", "embedding_share", "claim", "ours",
           "mean", "ci_low", "ci_high", "n_seeds", "verdict", "chance", "paper_value"]
CARRIED = ["claim", "mean", "ci_low", "ci_high", "n_seeds", "verdict", "paper_value"]


def scaling_table(claims, cell_facts, seeds=None):
    """The tidy scaling table (COLUMNS) from {cell: claims table}, the cells' facts (grid.facts:
    cell, hidden_size, layers, steps, tokens, params, embedding_share, ...) and optionally {cell:
    seed table}. A claims table with a pair column contributes its rows of the pair named after the
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
        rows = table[CARRIED].copy()
        rows["chance"] = _chance(table, None if seeds is None else seeds.get(cell))
        for column in COLUMNS[:7]:
            rows[column] = cell if column == "cell" else facts.loc[cell, column]
        frames.append(rows)
    out = pd.concat(frames, ignore_index=True)
    out["ours"] = [format_cell(*r) for r in zip(out["mean"], out["ci_low"], out["ci_high"])]
    rank = {c: i for i, c in enumerate(CLAIMS)}
    out = out.sort_values(["cell", "claim"], key=lambda c: c.map(rank) if c.name == "claim" else
                          c.map({cell: i for i, cell in enumerate(facts.index)}), kind="stable")
    return out[COLUMNS].reset_index(drop=True)


def write_scaling(table, csv_path, md_path):
    """results/tables/scaling.csv (every column) and scaling.md (all but mean, ci_low, ci_high, which
    `ours` shows), with tables.write_table."""
    write_table(table, csv_path, md_path)


def _chance(table, seeds):
    """Each row's chance level as a number (NaN where the claim has none)."""
    if seeds is not None:
        means = seeds.groupby("claim")["chance"].apply(pd.Series.mean)  # Series.mean, as claims_table takes it
        return table["claim"].map(means).to_numpy()
    return pd.to_numeric(table["chance"].replace("", None), errors="coerce").to_numpy()

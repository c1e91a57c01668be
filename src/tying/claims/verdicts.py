"""Claims summarised over seeds, each with a verdict, and the claims table's files.

The summary is the mean with a Student-t 95% interval over seeds (tying.stats). Verdict, with at least
MIN_SEEDS seeds: "holds" when the interval lies on the claimed side of the threshold, "does not hold" when
it lies on the other, "inconclusive" when it crosses; with fewer seeds, "direction only". A single
released pair of models gets a bootstrap interval over tokens and a verdict marked "one pair of models".
"""

import math

import pandas as pd

from tying.claims.definitions import CLAIMS, Statistic
from tying.errors import PipelineError
from tying.frames import markdown
from tying.io import atomic_path, write_parquet
from tying.plan.grid import MIN_SEEDS
from tying.stats import format_cell, mean_ci, token_bootstrap_ci

MD_COLUMNS = [
    "claim",
    "description",
    "paper",
    "ours",
    "interval",
    "on_claimed_side",
    "chance",
    "in_sample",
    "no_gradient_level",
    "criterion",
    "needs",
    "testable",
    "verdict",
    "detail",
]
# claims.md's lead table: a claim per line. Its headers are capitalised so that a reader of the full table below
# it (tying.claims.side_by_side.read_claims: the first header starting `| pair | claim |`) still finds that one.
COMPACT = {
    "pair": "Pair",
    "claim": "Claim",
    "token_set": "Token set",
    "paper": "Paper",
    "ours": "Ours",
    "chance": "Chance",
    "verdict": "Verdict",
}


def verdict(claim, values, low, high, one_pair=False):
    """The claim's verdict from its per-seed `values` and interval [low, high].

    Seeds: with fewer than MIN_SEEDS, "direction only (n seeds)"; else "holds" / "does not
    hold" / "inconclusive" from the interval. one_pair: a released pair's token-bootstrap
    interval, the verdict marked "(one pair of models)"; without an interval, "direction only".
    """
    n = int(pd.Series(values).notna().sum())
    if one_pair and (math.isnan(low) or math.isnan(high)):
        return "direction only (one pair of models)"
    if not one_pair and n < MIN_SEEDS:
        return f"direction only ({n} seed{'s' * (n != 1)})"
    low_side, high_side = claim.on_side(low), claim.on_side(high)
    other_side = (high < claim.threshold) if claim.direction == ">" else (low > claim.threshold)
    result = "holds" if low_side and high_side else "does not hold" if other_side else "inconclusive"
    return f"{result} (one pair of models)" if one_pair else result


def claims_table(statistics, one_pair=False, pair=None):
    """One row per claim in `statistics` ({claim id: Statistic or per-seed Series}), in CLAIMS order.

    one_pair: the statistics come from one released pair of models (no seeds): claims with
    per-token values get a token-bootstrap interval. pair: names the pair in a first column.
    """
    unknown = set(statistics) - set(CLAIMS)
    if unknown:
        raise PipelineError(f"unknown claim ids {sorted(unknown)}; known: {list(CLAIMS)}")
    rows = []
    for cid, claim in CLAIMS.items():
        if cid not in statistics:
            continue
        stat = statistics[cid] if isinstance(statistics[cid], Statistic) else Statistic(pd.Series(statistics[cid]))
        values = stat.values.dropna()
        n, on_side = len(values), int(claim.on_side(values).sum())
        if stat.interval is not None:  # its own interval (C3: over seeds and windows)
            mean, (low, high, interval) = float(values.mean()), stat.interval
        elif one_pair and stat.per_token is not None:
            mean, low, high = token_bootstrap_ci(stat.per_token)
            interval = f"95% bootstrap over {stat.per_token.notna().sum()} tokens, one pair of models"
        else:
            mean, low, high = mean_ci(values)
            interval = f"Student-t 95% over {n} seeds" if n > 1 else "none (one value)"
        row = {
            "claim": cid,
            "description": claim.description,
            "paper": claim.paper,
            "ours": format_cell(mean, low, high),
            "interval": interval,
            "on_claimed_side": f"{on_side} of {n} seed{'s' * (n != 1)}",
            "chance": _mean_text(stat.chance),
            "in_sample": _mean_text(stat.in_sample),
            "no_gradient_level": _mean_text(stat.level),
            "criterion": claim.criterion,
            "verdict": stat.verdict or verdict(claim, values, low, high, one_pair),
            "detail": stat.detail,
            "mean": mean,
            "ci_low": low,
            "ci_high": high,
            "n_seeds": n,
            "seeds_on_side": on_side,
            "in_sample_mean": _mean(stat.in_sample),
            "no_gradient_level_mean": _mean(stat.level),
            "paper_value": claim.paper_value,
        }
        rows.append(row)
    table = pd.DataFrame(rows)
    if pair is not None:
        table.insert(0, "pair", pair)
    return table


def with_paper_scale(table, paper_scale):
    """`table` with columns paper_scale (text), paper_scale_mean and paper_scale_differs
    (|paper-scale - paper| > the claim's tolerance; NA without one) from {claim id: value}."""
    columns = [_paper_scale_columns(CLAIMS[cid], paper_scale.get(cid, math.nan)) for cid in table["claim"]]
    return pd.concat([table, pd.DataFrame(columns, index=table.index)], axis=1).astype(
        {"paper_scale_differs": "boolean"}
    )


def paper_scale_values(table):
    """{claim id: value comparable with the paper's} from a claims table (its first pair's rows): in
    sample where measured."""
    if "pair" in table.columns:
        table = table[table["pair"] == table["pair"].iloc[0]]
    in_sample = table["in_sample_mean"] if "in_sample_mean" in table.columns else pd.Series(math.nan, table.index)
    return dict(zip(table["claim"], in_sample.fillna(table["mean"])))


def seed_table(statistics):
    """Tidy per-seed values of every claim: claim, seed, value, in_sample, chance."""
    frames = []
    for cid, stat in statistics.items():
        frame = pd.DataFrame({"value": stat.values})
        for name in ("in_sample", "chance"):
            extra = getattr(stat, name)
            frame[name] = math.nan if extra is None else extra.reindex(frame.index)
        frames.append(frame.rename_axis("seed").reset_index().assign(claim=cid))
    columns = ["claim", "seed", "value", "in_sample", "chance"]
    return pd.concat(frames, ignore_index=True)[columns] if frames else pd.DataFrame(columns=columns)


def _paper_scale_columns(claim, value):
    comparable = not (math.isnan(value) or math.isnan(claim.paper_value) or math.isnan(claim.tolerance))
    return {
        "paper_scale": format_cell(value, math.nan, math.nan),
        "paper_scale_mean": value,
        "paper_scale_differs": abs(value - claim.paper_value) > claim.tolerance if comparable else pd.NA,
    }


def write_claims(table, seeds, parquet_path, md_path, seeds_path):
    """results/tables/claims.{parquet,md} and the per-seed values: every column to Parquet; to Markdown a
    compact table (COMPACT's columns), then the readable columns in full."""
    write_parquet(table, parquet_path)
    write_parquet(seeds, seeds_path)
    extra = [
        c
        for c in ("commits", "paper_scale", "paper_scale_differs", "paper_scale_rows", "paper_scale_commits")
        if c in table.columns
    ]
    compact = table[[c for c in COMPACT if c in table.columns]].rename(columns=COMPACT)
    with atomic_path(md_path) as tmp:
        shown = [
            c
            for c in MD_COLUMNS[:1] + ["token_set"] * ("token_set" in table.columns) + MD_COLUMNS[1:]
            if c in table.columns
        ]
        tmp.write_text(
            markdown(compact)
            + "\nEvery column (results/tables/claims.parquet also holds the numbers):\n\n"
            + markdown(table, ["pair"] * ("pair" in table.columns) + shown + extra)
        )


def _mean(values):
    return math.nan if values is None or values.dropna().empty else float(values.mean())


def _mean_text(values):
    mean = _mean(values)
    return "" if math.isnan(mean) else f"{mean:.3f}"

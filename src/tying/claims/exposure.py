"""Claims by exposure: each per-token claim within strata of how often the runs drew its tokens.

A token's exposure is its `drawn` count in the pair's token set (tying.data.token_sets): how often every
run of the pair drew it by the compared step, the fewest over the runs. The per-token claims are
means over tokens of a per-token value, so they can be taken within any set of tokens:

- C1: held-out linear-map cosine Output(U)->Tied minus Input(U)->Tied (chance: the permuted targets');
- C2: KNN@k overlap Tied vs Output(U) minus Tied vs Input(U) (chance: the permuted-rows overlaps');
- C4: drift (cosine to step 0) of the untied input row minus the output row (no chance level);
- C7a, C7b: held-out Procrustes cosine of the scaled variant minus the tied run's, against Input(U)
  and Output(U) (chance: the permuted targets').

Over all analysed tokens these means are the claims table's values. Within each seed the tokens are
split into strata of draws (log-spaced edges), each stratum's mean is that seed's value, and the
seeds' values get the claims table's Student-t interval and verdict (tying.claims.verdicts.claims_table). A
stratum where any seed scores fewer than `min_tokens` tokens is left out and listed as such. The
comparable tokens are those drawn at least `comparable_draws` times: the paper's runs drew nearly
every analysed token thousands of times.

The claims by lookup share take the same values within strata of each token's lookup share (the share of
steps whose batch looked it up: tying.data.token_sets) in place of its draws: whether a claim follows how
often a row got a gradient at all, which batches as large as the paper's give nearly every row at every step.
"""

import math

import numpy as np
import pandas as pd

from tying.claims.definitions import ALL_TOKENS, CLAIMS, Statistic
from tying.claims.statistics import calibrated_statistics
from tying.claims.verdicts import claims_table, seed_table
from tying.errors import PipelineError
from tying.frames import at_step, only, pick, write_table
from tying.tidy import read_frames

VALUE_COLUMNS = ["pair", "claim", "seed", "token_id", "value", "chance"]
TABLE_COLUMNS = [
    "pair",
    "claim",
    "stratum",
    "draws_low",
    "draws_high",
    "tokens",
    "ours",
    "interval",
    "chance",
    "verdict",
    "paper",
    "left_out",
]
LOOKUP_COLUMNS = [
    "pair",
    "claim",
    "stratum",
    "share_low",
    "share_high",
    "tokens",
    "ours",
    "interval",
    "chance",
    "verdict",
    "paper",
    "left_out",
]


def token_values(
    pair, alignment=None, knn=None, evolution_tokens=None, scaling_tokens=None, *, k=10, scaled_variant="tied_x5"
):
    """Per-token values of each claim whose frame is given, at the pair's compared (last) step ->
    frame pair, claim, seed, token_id, value, chance (NaN where the claim has none).

    alignment, knn: the alignment and KNN metrics; evolution_tokens: the evolution metric's per-token
    drifts (run, seed, matrix, step, token_id, drift); scaling_tokens: the scaling metric's per-token
    cosines (pair, seed, step, variant, reference, scored, target, token_id, cosine).
    """
    parts = []
    if alignment is not None:
        rows = at_step(only(alignment, pair=pair, map="linear", scored="held_out"))
        wide = rows.set_index(["seed", "token_id", "target", "comparison"])["cosine"].unstack(["target", "comparison"])
        parts.append(_values("C1", wide, "output_u->tied", "input_u->tied", "alignment"))
    if knn is not None:
        rows = at_step(only(knn, pair=pair, k=k)).set_index(["seed", "token_id", "comparison"])
        wide = pd.concat({"true": rows["overlap"].unstack(), "permuted": rows["null_overlap"].unstack()}, axis=1)
        parts.append(_values("C2", wide, "tied_vs_output_u", "tied_vs_input_u", "knn"))
    if evolution_tokens is not None:
        rows = at_step(only(evolution_tokens, run=pair), by=("run",))
        wide = pd.concat({"true": rows.set_index(["seed", "token_id", "matrix"])["drift"].unstack()}, axis=1)
        parts.append(_values("C4", wide, "input", "output", "evolution"))
    if scaling_tokens is not None:
        rows = at_step(only(scaling_tokens, pair=pair, scored="held_out"))
        rows = rows[rows["variant"].isin(["tied", scaled_variant])]
        for cid, reference in (("C7a", "input_u"), ("C7b", "output_u")):
            ref = only(rows, reference=reference)
            wide = ref.set_index(["seed", "token_id", "target", "variant"])["cosine"].unstack(["target", "variant"])
            parts.append(_values(cid, wide, scaled_variant, "tied", "scaling"))
    return pd.concat(parts, ignore_index=True).assign(pair=pair)[VALUE_COLUMNS]


def pairs_values(
    pairs, token_sets, alignment, knn, evolution_tokens=None, scaling_tokens=None, *, k=10, scaled_variant="tied_x5"
):
    """token_values of each of `pairs` that has a token set (the first also with its per-token drifts and
    cosines, the others C1 and C2), with each token's draws (with_draws)."""
    trained = set(token_sets["pair"])
    values = [
        token_values(
            pair,
            alignment,
            knn,
            *((evolution_tokens, scaling_tokens) if i == 0 else ()),
            k=k,
            scaled_variant=scaled_variant,
        )
        for i, pair in enumerate(pairs)
        if pair in trained
    ]
    return with_draws(pd.concat(values, ignore_index=True), token_sets)


def job_values(inputs, params):
    """A claims-by-stratum job's `pairs_values`: the metric frames among its `inputs` (alignment, knn,
    evolution_tokens, scaling_tokens), its token sets, and its params' pairs, token-set ids, knn_k and scaled
    variant."""
    frames = {
        name: read_frames(inputs[name])
        for name in ("alignment", "knn", "evolution_tokens", "scaling_tokens")
        if name in inputs.keys()
    }
    return pairs_values(
        params.pairs,
        read_token_sets(inputs.token_sets, params.token_sets),
        **frames,
        k=params.knn_k,
        scaled_variant=params.scaled_variant,
    )


def read_token_sets(paths, ids):
    """One frame of the token sets at `paths`, each with its (pair, seed) of `ids` as columns."""
    return pd.concat(
        [pd.read_parquet(path).assign(pair=pair, seed=int(seed)) for path, (pair, seed) in zip(paths, ids)],
        ignore_index=True,
    )


def _values(cid, wide, minuend, subtrahend, metric):
    """One claim's per-token frame from `wide` (index seed, token_id; columns (target, key))."""
    true = wide["true"]
    value = pick(true, minuend, metric) - pick(true, subtrahend, metric)
    if "permuted" in wide.columns.get_level_values(0):
        permuted = wide["permuted"]
        chance = pick(permuted, minuend, metric) - pick(permuted, subtrahend, metric)
    else:
        chance = pd.Series(math.nan, index=value.index)
    return pd.DataFrame({"value": value, "chance": chance}).dropna(subset=["value"]).reset_index().assign(claim=cid)


def with_draws(values, token_sets):
    """`values` (token_values) joined with each token's draws from `token_sets` (pair, seed, token_id,
    drawn, per_million, and lookup_share where the sets have it)."""
    keys = ["pair", "seed", "token_id"]
    kept = keys + [c for c in ("drawn", "per_million", "lookup_share") if c in token_sets.columns]
    return values.merge(token_sets[kept], on=keys, how="left", validate="many_to_one")


def stratum_labels(edges):
    """'1-9', '10-99', ..., '>= 1000' for lower edges [1, 10, 100, 1000]."""
    return [f"{low}-{high - 1}" for low, high in zip(edges, edges[1:])] + [f">= {edges[-1]}"]


def share_labels(edges):
    """'0-1%', '1-10%', ..., '>= 90%' for lower edges of lookup shares [0, 0.01, 0.1, 0.9]."""
    pct = [f"{100 * e:g}" for e in edges]
    return [f"{low}-{high}%" for low, high in zip(pct, pct[1:])] + [f">= {pct[-1]}%"]


# Each stratifying column of exposure_table: its edge columns' prefix and its labels.
STRATA_BY = {"drawn": ("draws", stratum_labels), "lookup_share": ("share", share_labels)}


def strata(drawn, edges):
    """Stratum index of each draw count: i where edges[i] <= drawn < edges[i + 1]; -1 below edges[0]."""
    return np.searchsorted(np.asarray(edges), np.asarray(drawn), side="right") - 1


def strata_text(by_step, step, keep, edges):
    """The tokens `keep` by stratum of their draws at `step` (a token set by step), as text:
    '1-9: 442, 10-99: 2,958, ...'."""
    rows = by_step[(by_step["step"] == step) & by_step["token_id"].isin(keep)]
    counts = np.bincount(strata(rows["drawn"], edges) + 1, minlength=len(edges) + 1)[1:]
    return ", ".join(f"{label}: {n:,}" for label, n in zip(stratum_labels(list(edges)), counts))


def seed_statistics(values):
    """{claim: Statistic} of per-token `values` of one pair (claim, seed, value, chance): each seed's mean."""
    out = {}
    for cid, rows in values.groupby("claim", sort=False):
        means = rows.groupby("seed")[["value", "chance"]].mean()
        chance = means["chance"] if means["chance"].notna().any() else None
        out[cid] = Statistic(means["value"], chance=chance)
    return out


def comparable_rows(values, pairs, comparable_draws, mixture=None):
    """The claims table's rows on the comparable tokens (drawn at least `comparable_draws` times) of each of
    `pairs` that has per-token values, and the first pair's calibrated C1 and C2 on them (the `mixture`
    control's comparable tokens) -> (rows, their seed_table rows); token_set "drawn >= N", detail the
    tokens used per seed."""
    label, tables, seeds, statistics = f"drawn >= {comparable_draws}", [], [], {}
    for pair in pairs:
        rows = values[(values["pair"] == pair) & (values["drawn"] >= comparable_draws)]
        if rows.empty:
            continue
        statistics[pair] = seed_statistics(rows)
        counts = rows.groupby(["claim", "seed"]).size().groupby("claim").agg(["min", "max"])
        table = claims_table(statistics[pair], pair=pair)
        tables.append(
            table.assign(
                detail=[_range_text(pd.Series(counts.loc[c].to_numpy())) + " tokens a seed" for c in table["claim"]]
            )
        )
        seeds.append(seed_table(statistics[pair]).assign(pair=pair))
    first = pairs[0]
    if mixture in statistics and first in statistics:
        calibrated = calibrated_statistics(statistics[first], statistics[mixture])
        tables.append(claims_table(calibrated, pair=first))
        seeds.append(seed_table(calibrated).assign(pair=first))
    if not tables:
        return pd.DataFrame(), pd.DataFrame()
    return (
        pd.concat(tables, ignore_index=True).assign(token_set=label),
        pd.concat(seeds, ignore_index=True).assign(token_set=label),
    )


def with_comparable(table, comparable, pairs):
    """A claims or seed table with its comparable-token rows, each after the same pair's and claim's
    all-token rows."""
    table = pd.concat([table, comparable], ignore_index=True)
    rank = {
        "pair": {p: i for i, p in enumerate(pairs)},
        "claim": {c: i for i, c in enumerate(CLAIMS)},
        "token_set": {ALL_TOKENS: 0},
    }
    return table.sort_values(
        ["pair", "claim", "token_set"], key=lambda c: c.map(rank[c.name]).fillna(1), kind="stable", ignore_index=True
    )


def exposure_table(values, edges, min_tokens, by="drawn"):
    """One row per (pair, claim, stratum of draws), and a row over all analysed tokens: each seed's mean over
    the stratum's tokens, summarised over seeds as the claims table does (mean, Student-t 95% interval,
    chance, verdict), with the stratum's draws and tokens (fewest to most over seeds). A stratum where any
    seed has fewer than `min_tokens` tokens gets no numbers, and left_out says why.

    values: with_draws's frame; edges: ascending lower edges of `by` (a STRATA_BY column: drawn, whose
    edge columns are draws_low and draws_high; lookup_share, share_low and share_high).
    """
    prefix, label_of = STRATA_BY[by]
    if by not in values.columns or values[by].isna().any():
        raise PipelineError(
            f"the token sets have no {by} for every token: their drawn counts predate it "
            "(rebuild them: snakemake -R drawn)"
        )
    labels = label_of(list(edges))
    values = values.assign(stratum=strata(values[by], edges))
    rows = []
    for (pair, cid), group in values.groupby(["pair", "claim"], sort=False):
        n_seeds = group["seed"].nunique()
        for index, label in [(None, ALL_TOKENS), *enumerate(labels)]:
            part = group if index is None else group[group["stratum"] == index]
            counts = part.groupby("seed").size().reindex(group["seed"].unique(), fill_value=0)
            low, high = (edges[0], math.inf) if index is None else (edges[index], (list(edges) + [math.inf])[index + 1])
            base = {
                "pair": pair,
                "claim": cid,
                "stratum": label,
                f"{prefix}_low": low,
                f"{prefix}_high": high,
                "tokens": _range_text(counts),
                "tokens_min": int(counts.min()),
                "n_seeds": n_seeds,
                "paper": CLAIMS[cid].paper,
                "paper_value": CLAIMS[cid].paper_value,
            }
            if counts.min() < min_tokens:
                rows.append({**base, "left_out": f"fewer than {min_tokens} tokens in a seed"})
                continue
            statistic = seed_statistics(part)
            row = claims_table(statistic).iloc[0]
            chance = statistic[cid].chance
            rows.append(
                {
                    **base,
                    "left_out": "",
                    "chance_mean": math.nan if chance is None else float(chance.mean()),
                    **{c: row[c] for c in ("ours", "interval", "chance", "verdict", "mean", "ci_low", "ci_high")},
                }
            )
    return pd.DataFrame(rows)


def _range_text(counts):
    return f"{counts.min():,}" if counts.min() == counts.max() else f"{counts.min():,}-{counts.max():,}"


def write_exposure_table(table, csv_path, md_path, columns=TABLE_COLUMNS):
    """results/tables/claims_by_exposure.{csv,md} (or a scaling grid's scaling_exposure): every column to CSV,
    `columns` (those present) to Markdown."""
    write_table(table, csv_path, md_path, columns, shown=table.fillna(""))

"""Claims over training: the claims table's statistics at every checkpoint a pair's models share.

Each point (a trained checkpoint step, or a matched pair of released branches) gets the metric frames
the final-step metric jobs write (alignment_frame, knn_frame, scaling_frame, on the same analysed
tokens), reduced within each seed by claim_statistics and summarised over seeds by claims_table, so the
last point of a trained pair reproduces the claims table (docs/methods.md, Statistics). A trained pair's
point keeps the analysed tokens its runs had drawn `min_count` times by that step (tying.data.token_sets.seen_by):
a token first drawn later still holds its initial row there, which would lean early points toward the
claims. A point where no token has been drawn yet (step 0) has no claims.
"""

import math

import pandas as pd

from tying.claims import preconditions
from tying.claims.definitions import ALL_TOKENS, CLAIMS, Statistic
from tying.claims.statistics import claim_statistics
from tying.claims.verdicts import claims_table
from tying.frames import markdown, write_table
from tying.metrics.alignment import alignment_frame, scaling_frame
from tying.metrics.knn_overlap import knn_frame
from tying.stats import format_cell
from tying.tidy import with_ids

CLAIM_IDS = ("LM", "C1", "C2", "C4", "C7a", "C7b")
POINT_COLUMNS = [
    "pair",
    "point",
    "step",
    "tokens",
    "analysed_tokens",
    "exposure",
    "tied",
    "untied",
    "tied_tokens",
    "untied_tokens",
]
KINDS = ("value", "in_sample", "chance")  # per-seed rows; "token": one seed's per-token values
TABLE_COLUMNS = [
    "claim",
    "mean",
    "ci_low",
    "ci_high",
    "n_seeds",
    "interval",
    "chance",
    "testable",
    "verdict",
    "on_claimed_side",
    "paper_value",
]
MD_COLUMNS = [
    "pair",
    "claim",
    "step",
    "tokens",
    "analysed_tokens",
    "exposure",
    "tied",
    "untied",
    "ours",
    "interval",
    "chance",
    "verdict",
]


def point_frames(untied, tied, scaled, keep, analysis, k, approximate):
    """{metric: frame} of one point, as the alignment, knn and scaling jobs compute them: held-out
    linear-map alignment, KNN@k, and Procrustes scaling of each {variant: Embeddings} in `scaled`."""
    options = {"held_out": analysis["held_out"], "seed": analysis["split_seed"]}
    frames = {
        "alignment": alignment_frame(untied, tied, maps=("linear",), keep=keep, **options),
        "knn": knn_frame(
            untied, tied, ks=(k,), approximate=approximate, keep=keep, null_seed=analysis["split_seed"] + 1
        ),
    }
    if scaled:
        frames["scaling"] = pd.concat(
            [
                scaling_frame(emb, untied, keep=keep, **options).assign(variant=variant)
                for variant, emb in scaled.items()
            ],
            ignore_index=True,
        )
    return frames


def point_rows(untied, tied, scaled, keep, evolution, quality=None, *, ids, analysis, k, approximate, scaled_variant):
    """One seed's statistic rows at one point: point_frames with `ids` (pair, seed, step) on the tokens `keep`,
    reduced by statistic_rows with the seed's per-token `evolution` drifts (or None) up to that step, on the
    same tokens, and its models' `quality` rows (or None) at that step."""
    frames = {
        name: with_ids(f, ids) for name, f in point_frames(untied, tied, scaled, keep, analysis, k, approximate).items()
    }
    if evolution is not None:
        evolution = drift_means(evolution[evolution["step"] <= ids["step"]], keep)
    if quality is not None:
        quality = quality[quality["step"] == ids["step"]]
        frames["quality"] = quality if len(quality) else None
    return statistic_rows(frames, evolution, pair=ids["pair"], k=k, scaled_variant=scaled_variant)


def drift_means(per_token, keep=None):
    """The evolution metric's mean drifts (run, seed, matrix, step, drift) from its per-token drifts, over the
    tokens `keep` (None: all)."""
    rows = per_token if keep is None else per_token[per_token["token_id"].isin(keep)]
    return rows.groupby(["run", "seed", "matrix", "step"], as_index=False)["drift"].mean()


def statistic_rows(frames, evolution=None, *, pair, k, scaled_variant):
    """Tidy rows (claim, kind, token_id, value) of one seed's claim statistics at one point.

    frames: point_frames with columns pair, seed, step (and "quality": the models' quality rows at the step,
    claim LM); evolution: the seed's evolution frame up to this point's step (C4), or None. kind is value,
    in_sample or chance (token_id -1), or token (the per-token values a single pair of models is bootstrapped over).
    """
    statistics = claim_statistics(**frames, evolution=evolution, pair=pair, k=k, scaled_variant=scaled_variant)
    rows = []
    for cid in CLAIM_IDS:
        if cid not in statistics:
            continue
        stat = statistics[cid]
        for kind in KINDS:
            values = stat.values if kind == "value" else getattr(stat, kind)
            if values is not None:
                rows.append(pd.DataFrame({"claim": cid, "kind": kind, "token_id": -1, "value": values.to_numpy()}))
        if stat.per_token is not None:
            rows.append(
                pd.DataFrame(
                    {
                        "claim": cid,
                        "kind": "token",
                        "token_id": stat.per_token.index.to_numpy(),
                        "value": stat.per_token.to_numpy(),
                    }
                )
            )
    return pd.concat(rows, ignore_index=True)


def claims_by_point(rows, released=()):
    """One row per (pair, point, claim): claims_table's mean, interval and verdict over seeds (a
    `released` pair: one pair of models, a token bootstrap), the mean chance level, and the point's ids.
    A claim that needs language models is "not testable here" at a point where LM does not hold
    (tying.claims.preconditions)."""
    out = []
    for (pair, _), group in rows.groupby(["pair", "point"], sort=False):
        statistics = {cid: _statistic(g) for cid, g in group.groupby("claim", sort=False)}
        table = claims_table(statistics, one_pair=pair in released, pair=pair).assign(token_set=ALL_TOKENS)
        table = preconditions.apply(table, preconditions.pair_checks(table, pair))[TABLE_COLUMNS]
        chance = {cid: _mean(s.chance) for cid, s in statistics.items()}
        ids = group[[c for c in POINT_COLUMNS if c in group.columns]].iloc[0].to_dict()
        if "seen_tokens" in group.columns:  # a trained pair's tokens seen by this point, fewest to most over seeds;
            # `exposure`: the first seed's tokens by stratum of draws
            seen = group.groupby("seed")["seen_tokens"].first()
            ids["analysed_tokens"] = f"{seen.min():,}" + (f"-{seen.max():,}" if seen.max() > seen.min() else "")
        out.append(table.assign(chance_mean=table["claim"].map(chance), **ids))
    table = pd.concat(out, ignore_index=True)
    rank = {"pair": {p: i for i, p in enumerate(rows["pair"].unique())}, "claim": {c: i for i, c in enumerate(CLAIMS)}}
    table = table.sort_values(["pair", "claim", "point"], key=lambda c: c.map(rank[c.name]) if c.name in rank else c)
    ids = [c for c in POINT_COLUMNS if c in table.columns]
    return table[ids + [c for c in table.columns if c not in ids]].reset_index(drop=True)


def first_holding(table):
    """Per (pair, claim): the first point whose verdict is "holds" and whether every later point holds
    too; columns pair, claim, first_step, first_tokens, holds_after (NaN/False when it never holds)."""
    out = []
    for (pair, claim), rows in table.groupby(["pair", "claim"], sort=False):
        holds = rows["verdict"].str.startswith("holds").to_numpy()
        first = int(holds.argmax()) if holds.any() else None
        out.append(
            {
                "pair": pair,
                "claim": claim,
                "first_step": rows["step"].iloc[first] if first is not None else math.nan,
                "first_tokens": rows["tokens"].iloc[first] if first is not None else math.nan,
                "holds_after": first is not None and bool(holds[first:].all()),
            }
        )
    return pd.DataFrame(out)


def write_claims_over_training(table, csv_path, md_path):
    """The table to CSV (every column) and Markdown (readable columns, then when each claim first holds)."""
    shown = table.assign(
        ours=[format_cell(*r) for r in zip(table["mean"], table["ci_low"], table["ci_high"])],
        tokens=table["tokens"].map(tokens_label),
    )
    first = first_holding(table).assign(
        first=lambda f: [
            "never" if pd.isna(t) else tokens_label(t) + ("" if pd.isna(s) else f" (step {s:.0f})")
            for s, t in zip(f["first_step"], f["first_tokens"])
        ],
        every_later_point=lambda f: f["holds_after"].map({True: "yes", False: "no"}),
    )
    first_text = markdown(first, ["pair", "claim", "first", "every_later_point"])
    write_table(table, csv_path, md_path, MD_COLUMNS, shown, "\nFirst point where each claim holds:\n\n" + first_text)


def tokens_label(tokens):
    """Tokens seen, short: '307k', '20.5M', '4B', '3.0T'."""
    for scale, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if tokens >= scale:
            return f"{tokens / scale:.3g}{unit}"
    return f"{tokens:.0f}"


def _statistic(rows):
    """A claims.Statistic from one claim's tidy rows at one point."""
    by_kind = {kind: rows[rows["kind"] == kind] for kind in (*KINDS, "token")}
    series = {kind: by_kind[kind].set_index("seed")["value"] if len(by_kind[kind]) else None for kind in KINDS}
    tokens = by_kind["token"]
    per_token = tokens.set_index("token_id")["value"] if len(tokens) and tokens["seed"].nunique() == 1 else None
    return Statistic(series["value"], in_sample=series["in_sample"], chance=series["chance"], per_token=per_token)


def _mean(values):
    return math.nan if values is None or values.dropna().empty else float(values.mean())

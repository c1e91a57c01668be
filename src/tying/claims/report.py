"""The claims table of a run: every claim of its first pair, C1, C2 and LM of the pairs after it, the
calibrated claims, and (trained pairs) each per-token claim again on well-exposed tokens, with
each claim's preconditions applied."""

import pandas as pd

from tying.claims.definitions import ALL_TOKENS, NORM_SHUFFLES
from tying.claims.exposure import comparable_rows, pairs_values, with_comparable
from tying.claims.preconditions import apply, pair_checks, with_unmeasured
from tying.claims.statistics import calibrated_statistics, claim_statistics, seed_statistics
from tying.claims.verdicts import claims_table, paper_scale_values, seed_table, with_paper_scale

REPORT_OPTIONS = ("knn_k", "early_steps", "scaled_variant", "released", "at_paper_scale", "mixture", "norm_shuffles")


def claims_tables(frames, further, options, token_sets=None, per_token=None, commits=None, paper_scale=None):
    """The claims rule's tables -> (table, seeds): `claims_report`, then, where `token_sets` is given (trained
    pairs), each per-token claim again on the tokens drawn at least options["comparable_draws"] times, then
    each claim's preconditions (tying.claims.preconditions), and for a local first pair (a released pair whose
    models' quality, the LM row, was measured here) the claims it cannot measure (`with_unmeasured`).

    options: the rule's params (pairs, comparable_draws and REPORT_OPTIONS); token_sets: the pairs' token
    sets (tying.claims.exposure.read_token_sets); per_token: {"evolution_tokens", "scaling_tokens": frame}.
    """
    pairs = options["pairs"]
    table, seeds = claims_report(
        frames, pairs, further, commits, paper_scale, **{name: options[name] for name in REPORT_OPTIONS}
    )
    if token_sets is not None:
        metrics = {name: pd.concat([frames[name], further.get(name)]) for name in ("alignment", "knn")}
        values = pairs_values(
            pairs,
            token_sets,
            **metrics,
            **(per_token or {}),
            k=options["knn_k"],
            scaled_variant=options["scaled_variant"],
        )
        rows, seed_rows = comparable_rows(values, pairs, options["comparable_draws"], options["mixture"])
        table, seeds = with_comparable(table, rows, pairs), with_comparable(seeds, seed_rows, pairs)
    table = apply(table, pair_checks(table, pairs[0], frames.get("lens"), frames.get("norm_freq")))
    if pairs[0] in options["released"] and "quality" in frames:  # a local pair: its models' quality measured here
        table = with_unmeasured(table, pairs[0])
    return table, seeds


def claims_report(
    frames,
    pairs,
    further=None,
    commits=None,
    paper_scale=None,
    *,
    knn_k=10,
    early_steps=None,
    scaled_variant="tied_x5",
    released=(),
    at_paper_scale=False,
    mixture=None,
    norm_shuffles=NORM_SHUFFLES,
):
    """The claims table and its per-seed values -> (table, seeds), as results/tables/claims.* hold them.

    frames: {claim_statistics argument: tidy frame} of the first of `pairs`; further: {"alignment",
    "knn", and for trained pairs "quality": frames} of the pairs after it (C1, C2 and LM each); commits: the
    full commits of a released pair's tied and untied models; paper_scale: a paper-scale run's claims table,
    shown beside ours;
    at_paper_scale: the first pair is released models, so its numbers are the paper-scale ones; mixture: the
    further pair that is the mixture control, whose C1 and C2 calibrate the first pair's (C1cal, C2cal).
    """
    pair, *others = pairs
    statistics = claim_statistics(
        **frames,
        pair=pair,
        k=knn_k,
        early_steps=early_steps,
        scaled_variant=scaled_variant,
        norm_shuffles=norm_shuffles,
    )
    rows = ", ".join(sorted({r for f in frames.values() if "rows" in f.columns for r in f["rows"].unique()}))
    table = claims_table(statistics, one_pair=at_paper_scale, pair=pair).assign(rows=rows)
    if commits:  # released models: the short commits their numbers came from (tied, untied)
        table = table.assign(commits=" / ".join(c[:7] for c in commits))
    if paper_scale is not None:  # a paper-scale run's claims table
        table = with_paper_scale(table, paper_scale_values(paper_scale)).assign(
            **{
                f"paper_scale_{c}": paper_scale[c].iloc[0] if c in paper_scale.columns else ""
                for c in ("rows", "commits")
            }
        )
    elif at_paper_scale:  # this run is the paper-scale one
        table = with_paper_scale(table, paper_scale_values(table)).assign(
            paper_scale_rows=rows, paper_scale_commits=table.get("commits", "")
        )
    seeds = seed_table(statistics).assign(pair=pair)
    if others:
        more, more_seeds = further_claims(
            further["alignment"], further["knn"], others, knn_k, released, further.get("quality")
        )
        table, seeds = pd.concat([table, more], ignore_index=True), pd.concat([seeds, more_seeds], ignore_index=True)
    if mixture is not None:
        calibrated = calibrated_statistics(statistics, seed_statistics(seeds, mixture))
        table = pd.concat([table, claims_table(calibrated, pair=pair)], ignore_index=True)
        seeds = pd.concat([seeds, seed_table(calibrated).assign(pair=pair)], ignore_index=True)
    return table.assign(token_set=ALL_TOKENS), seeds.assign(token_set=ALL_TOKENS)


def further_claims(alignment, knn, pairs, k=10, released=(), quality=None):
    """C1 and C2 of each of `pairs` (claims pairs after the first: negative controls, other pairs), from
    their alignment and KNN metrics, and LM from the trained pairs' `quality` -> (claims_table rows with a
    pair column, seed_table rows)."""
    tables, seeds = [], []
    for pair in pairs:
        own = None if pair in released or quality is None else quality
        statistics = claim_statistics(alignment=alignment, knn=knn, quality=own, pair=pair, k=k)
        tables.append(claims_table(statistics, one_pair=pair in released, pair=pair))
        seeds.append(seed_table(statistics).assign(pair=pair))
    return pd.concat(tables, ignore_index=True), pd.concat(seeds, ignore_index=True)

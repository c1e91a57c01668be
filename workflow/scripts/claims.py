import pandas as pd

from tying.claims import claims_report, write_claims
from tying.exposure import comparable_rows, pairs_values, read_token_sets, with_comparable
from tying.preconditions import apply, pair_checks
from tying.rule_script import run
from tying.survey import source_commit
from tying.tidy import read_frames


def main(snakemake):
    p, inputs = snakemake.params, dict(snakemake.input.items())
    paper_scale, sources = inputs.pop("paper_scale", None), inputs.pop("sources", None)
    exposure = {name.removeprefix("exposure_"): inputs.pop(name) for name in list(inputs) if name.startswith("exposure_")}
    further = {name.removeprefix("further_"): read_frames(inputs.pop(name)) for name in list(inputs)
               if name.startswith("further_")}
    frames = {name: read_frames(paths) for name, paths in inputs.items()}
    table, seeds = claims_report(
        frames, p.pairs, further,
        commits=[source_commit(d) for d in sources] if sources else None,
        paper_scale=pd.read_parquet(paper_scale) if paper_scale else None,
        k=p.k, early_steps=p.early_steps, scaled_variant=p.scaled_variant, released=p.released,
        at_paper_scale=p.at_paper_scale, mixture=p.mixture, norm_shuffles=p.norm_shuffles)
    if p.token_sets:  # trained pairs: each per-token claim again on the well-exposed tokens
        metrics = {name: pd.concat([frames[name], further.get(name)]) for name in ("alignment", "knn")}
        per_token = {name: read_frames(exposure[name]) for name in ("evolution_tokens", "scaling_tokens")
                     if name in exposure}
        values = pairs_values(p.pairs, read_token_sets(exposure["token_sets"], p.token_sets), **metrics, **per_token,
                              k=p.k, scaled_variant=p.scaled_variant)
        rows, seed_rows = comparable_rows(values, p.pairs, p.comparable_draws, p.mixture)
        table, seeds = with_comparable(table, rows, p.pairs), with_comparable(seeds, seed_rows, p.pairs)
    table = apply(table, pair_checks(table, p.pairs[0], frames.get("lens"), frames.get("norm_freq")))
    write_claims(table, seeds, snakemake.output.parquet, snakemake.output.md, snakemake.output.seeds)


run(snakemake, main)

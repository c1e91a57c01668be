import pandas as pd

from tying.checkpoints.embeddings import load_embeddings
from tying.claims.claims_over_training import point_rows
from tying.claims.exposure import strata_text
from tying.data.token_sets import seen_by
from tying.io import write_parquet
from tying.rule_script import run
from tying.runtime import configure
from tying.tidy import with_ids


def main(snakemake):
    configure(snakemake.threads)
    inp, p, rows = snakemake.input, snakemake.params, snakemake.params.analysis["rows"]
    evolution = pd.read_parquet(inp.evolution) if "evolution" in inp.keys() else None
    by_step = pd.read_parquet(inp.by_step) if "by_step" in inp.keys() else None
    quality = pd.read_parquet(inp.quality) if "quality" in inp.keys() else None
    scaled = iter(inp.scaled) if "scaled" in inp.keys() else iter(())
    out = []
    for point, (ids, untied_dir, tied_dir) in enumerate(zip(p.points, inp.untied, inp.tied)):
        variants = [next(scaled) for _ in p.variants]
        keep = None if by_step is None else seen_by(by_step, ids["step"], p.min_count)
        if keep is not None and len(keep) <= p.knn_k + 1:  # no token (step 0), or too few for KNN@k, drawn yet
            print(f"step {ids['step']}: {len(keep)} tokens drawn {p.min_count}+ times yet; no claims at this point")
            continue
        untied, tied = load_embeddings(untied_dir, rows=rows), load_embeddings(tied_dir, rows=rows)
        scaled_models = {v: load_embeddings(d, rows=rows) for v, d in zip(p.variants, variants)}
        stats = point_rows(
            untied,
            tied,
            scaled_models,
            keep,
            evolution,
            quality,
            ids={**p.ids, "step": ids.get("step", point)},
            analysis=p.analysis,
            k=p.knn_k,
            approximate=p.approximate,
            scaled_variant=p.variants[-1] if p.variants else None,
        )
        seen = (
            {}
            if keep is None
            else {"seen_tokens": len(keep), "exposure": strata_text(by_step, ids["step"], keep, p.edges)}
        )
        out.append(with_ids(stats, {**p.ids, "point": point, "step": None, **ids, **seen}))  # a released point: no step
    write_parquet(pd.concat(out, ignore_index=True), snakemake.output[0])


run(snakemake, main)

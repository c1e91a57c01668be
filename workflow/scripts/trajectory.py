import pandas as pd

from tying.embeddings import load_embeddings
from tying.io import write_parquet
from tying.rule_script import run
from tying.runtime import configure
from tying.tidy import with_ids
from tying.token_sets import analysed_tokens
from tying.trajectory import point_rows


def main(snakemake):
    configure(snakemake.threads)
    inp, p, rows = snakemake.input, snakemake.params, snakemake.params.analysis["rows"]
    evolution = pd.read_parquet(inp.evolution) if "evolution" in inp.keys() else None
    scaled = iter(inp.scaled) if "scaled" in inp.keys() else iter(())
    keep = analysed_tokens(inp.get("tokens"))
    out = []
    for point, (ids, untied_dir, tied_dir) in enumerate(zip(p.points, inp.untied, inp.tied)):
        untied, tied = load_embeddings(untied_dir, rows=rows), load_embeddings(tied_dir, rows=rows)
        variants = {v: load_embeddings(next(scaled), rows=rows) for v in p.variants}
        stats = point_rows(untied, tied, variants, keep, evolution,
                           ids={**p.ids, "step": ids.get("step", point)}, analysis=p.analysis, k=p.k,
                           approximate=p.approximate, scaled_variant=p.variants[-1] if p.variants else None)
        out.append(with_ids(stats, {**p.ids, "point": point, "step": None, **ids}))  # a released point: no step
    write_parquet(pd.concat(out, ignore_index=True), snakemake.output[0])


run(snakemake, main)

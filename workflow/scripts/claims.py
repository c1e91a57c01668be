import pandas as pd

from tying.claims import claims_report, write_claims
from tying.rule_script import run
from tying.survey import source_commit
from tying.tidy import read_frames


def main(snakemake):
    p, inputs = snakemake.params, dict(snakemake.input.items())
    paper_scale, sources = inputs.pop("paper_scale", None), inputs.pop("sources", None)
    further = {name.removeprefix("further_"): read_frames(inputs.pop(name)) for name in list(inputs)
               if name.startswith("further_")}
    table, seeds = claims_report(
        {name: read_frames(paths) for name, paths in inputs.items()}, p.pairs, further,
        commits=[source_commit(d) for d in sources] if sources else None,
        paper_scale=pd.read_parquet(paper_scale) if paper_scale else None,
        k=p.k, early_steps=p.early_steps, scaled_variant=p.scaled_variant, released=p.released,
        at_paper_scale=p.at_paper_scale)
    write_claims(table, seeds, snakemake.output.parquet, snakemake.output.md, snakemake.output.seeds)


run(snakemake, main)

import pandas as pd

from tying.claims import claim_statistics, claims_table, paper_scale_values, seed_table, with_paper_scale, write_claims
from tying.script import run
from tying.tidy import read_frames


def main(snakemake):
    p = snakemake.params
    inputs = dict(snakemake.input.items())
    paper_scale_path = inputs.pop("paper_scale", None)
    frames = {name: read_frames(paths) for name, paths in inputs.items()}
    statistics = claim_statistics(**frames, pair=p.pair, k=p.k, early_steps=p.early_steps,
                                  scaled_variant=p.scaled_variant)
    rows = ", ".join(sorted({r for f in frames.values() if "rows" in f.columns for r in f["rows"].unique()}))
    table = claims_table(statistics, one_pair=p.at_paper_scale).assign(rows=rows)
    if paper_scale_path:  # a paper-scale run's claims table
        paper_scale = pd.read_parquet(paper_scale_path)
        table = with_paper_scale(table, paper_scale_values(paper_scale)).assign(
            paper_scale_rows=paper_scale["rows"].iloc[0] if "rows" in paper_scale.columns else "")
    elif p.at_paper_scale:  # this run is the paper-scale one
        table = with_paper_scale(table, paper_scale_values(table)).assign(paper_scale_rows=rows)
    out = snakemake.output
    write_claims(table, seed_table(statistics), out.parquet, out.md, out.seeds)


run(snakemake, main)

import pandas as pd

from tying.claims import claim_statistics, claims_table, write_claims
from tying.lens import early_layer_gap
from tying.script import run
from tying.tidy import read_frames


def main(snakemake):
    p = snakemake.params
    inputs = dict(snakemake.input.items())
    paper_scale_path = inputs.pop("paper_scale", None)
    frames = {name: read_frames(paths) for name, paths in inputs.items()}
    frames["lens"] = early_layer_gap(frames["lens"])
    statistics = claim_statistics(**frames, pair=p.pair, k=p.k, grad_flow_steps=p.grad_flow_steps,
                                  scaled_variant=p.scaled_variant)
    if paper_scale_path:  # a paper-scale run's claims table: one value (its mean) per claim
        paper_scale = {row.claim: pd.Series([row.mean]) for row in pd.read_parquet(paper_scale_path).itertuples()}
    else:
        paper_scale = statistics if p.at_paper_scale else None
    write_claims(claims_table(statistics, paper_scale=paper_scale), snakemake.output.parquet, snakemake.output.md)


run(snakemake, main)

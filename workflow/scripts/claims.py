from tying.claims import claim_statistics, claims_table, write_claims
from tying.lens import early_layer_gap
from tying.script import run
from tying.tidy import read_frames


def main(snakemake):
    p = snakemake.params
    frames = {name: read_frames(paths) for name, paths in snakemake.input.items()}
    frames["lens"] = early_layer_gap(frames["lens"])
    statistics = claim_statistics(**frames, pair=p.pair, k=p.k, grad_flow_steps=p.grad_flow_steps,
                                  scaled_variant=p.scaled_variant)
    write_claims(claims_table(statistics), snakemake.output.parquet, snakemake.output.md)


run(snakemake, main)

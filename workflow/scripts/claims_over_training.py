from tying.claims.claims_over_training import claims_by_point, write_claims_over_training
from tying.report.figures.claims_over_training import plot_claims_over_training
from tying.rule_script import run
from tying.tidy import read_frames


def main(snakemake):
    inp, released, out = snakemake.input, snakemake.params.released, snakemake.output
    table = claims_by_point(read_frames(inp.trajectory), released)
    write_claims_over_training(table, out.csv, out.md)
    plot_claims_over_training(table, out.figure, released, read_frames(inp.quality) if inp.quality else None)


run(snakemake, main)

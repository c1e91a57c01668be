from tying.figures.claims_over_training import plot_claims_over_training
from tying.rule_script import run
from tying.tidy import read_frames
from tying.trajectory import summarise, write_claims_over_training


def main(snakemake):
    released, out = snakemake.params.released, snakemake.output
    table = summarise(read_frames(snakemake.input), released)
    write_claims_over_training(table, out.csv, out.md)
    plot_claims_over_training(table, out.figure, released)


run(snakemake, main)

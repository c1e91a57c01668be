from tying.frames import write_table
from tying.report import tables
from tying.rule_script import run
from tying.tidy import read_frames


def main(snakemake):
    table = tables.build(snakemake.rule, read_frames(snakemake.input), **dict(snakemake.params.items()))
    write_table(table, snakemake.output.csv, snakemake.output.md)


run(snakemake, main)

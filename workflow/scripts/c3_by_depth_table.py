import pandas as pd

from tying.claims.c3_by_depth import c3_by_depth, write_c3_by_depth
from tying.rule_script import run
from tying.tidy import read_frames


def main(snakemake):
    table = c3_by_depth(pd.read_csv(snakemake.input.scaling), read_frames(snakemake.input.lens))
    write_c3_by_depth(table, snakemake.output.csv, snakemake.output.md)


run(snakemake, main)

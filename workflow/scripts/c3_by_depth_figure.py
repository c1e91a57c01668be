import pandas as pd

from tying.report.figures.c3_by_depth import plot_c3_by_depth
from tying.rule_script import run


def main(snakemake):
    plot_c3_by_depth(pd.read_csv(snakemake.input[0]), snakemake.output[0])


run(snakemake, main)

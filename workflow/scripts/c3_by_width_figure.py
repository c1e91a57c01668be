import pandas as pd

from tying.report.figures.c3_by_width import plot_c3_by_width
from tying.rule_script import run


def main(snakemake):
    plot_c3_by_width(pd.read_csv(snakemake.input[0]), snakemake.output[0])


run(snakemake, main)

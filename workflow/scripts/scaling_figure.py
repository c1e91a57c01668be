import pandas as pd

from tying.report.figures.scaling import plot_scaling
from tying.rule_script import run


def main(snakemake):
    plot_scaling(pd.read_csv(snakemake.input[0]), snakemake.output[0])


run(snakemake, main)

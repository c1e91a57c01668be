import pandas as pd

from tying.report.figures.survey import plot_survey
from tying.rule_script import run


def main(snakemake):
    plot_survey(pd.read_csv(snakemake.input[0]), snakemake.output[0])


run(snakemake, main)

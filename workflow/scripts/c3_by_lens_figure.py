import pandas as pd

from tying.report.figures.c3_by_lens import plot_c3_by_lens
from tying.rule_script import run


def main(snakemake):
    plot_c3_by_lens(pd.read_parquet(snakemake.input.table), pd.read_parquet(snakemake.input.by_state),
                    snakemake.output[0])


run(snakemake, main)

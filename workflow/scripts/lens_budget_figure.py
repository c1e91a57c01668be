import pandas as pd

from tying.report.figures.lens_budget import plot_lens_budget
from tying.rule_script import run


def main(snakemake):
    plot_lens_budget(
        pd.read_parquet(snakemake.input.table), pd.read_parquet(snakemake.input.by_state), snakemake.output[0]
    )


run(snakemake, main)

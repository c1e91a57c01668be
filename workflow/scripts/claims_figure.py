import pandas as pd

from tying.report.figures.claims_summary import plot_claims_summary, summary_rows
from tying.rule_script import run


def main(snakemake):
    tables = {label: pd.read_parquet(path) for label, path in zip(snakemake.params.labels, snakemake.input)}
    plot_claims_summary(summary_rows(tables), snakemake.output[0])


run(snakemake, main)

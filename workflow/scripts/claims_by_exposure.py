from tying.claims.exposure import exposure_table, job_values, write_exposure_table
from tying.report.figures.claims_by_exposure import plot_claims_by_exposure
from tying.rule_script import run


def main(snakemake):
    p = snakemake.params
    values = job_values(snakemake.input, p)
    table = exposure_table(values, p.edges, p.min_tokens)
    write_exposure_table(table, snakemake.output.csv, snakemake.output.md)
    plot_claims_by_exposure(table, snakemake.output.figure)


run(snakemake, main)

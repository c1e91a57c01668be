from tying.claims.exposure import LOOKUP_COLUMNS, exposure_table, job_values, write_exposure_table
from tying.rule_script import run


def main(snakemake):
    p = snakemake.params
    values = job_values(snakemake.input, p)
    table = exposure_table(values, p.edges, p.min_tokens, by="lookup_share")
    write_exposure_table(table, snakemake.output.csv, snakemake.output.md, LOOKUP_COLUMNS)


run(snakemake, main)

import pandas as pd

from tying.grid import FACT_COLUMNS
from tying.rule_script import run
from tying.sweep import scaling_table, write_scaling


def main(snakemake):
    facts = pd.DataFrame(snakemake.params.facts, columns=FACT_COLUMNS)
    claims = dict(zip(facts["cell"], map(pd.read_parquet, snakemake.input.claims)))
    seeds = dict(zip(facts["cell"], map(pd.read_parquet, snakemake.input.seeds)))
    write_scaling(scaling_table(claims, facts, seeds), snakemake.output.csv, snakemake.output.md)


run(snakemake, main)

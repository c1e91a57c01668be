import pandas as pd

from tying.claims.scaling import paired_trends, scaling_table, write_scaling
from tying.plan.grid import FACT_COLUMNS
from tying.rule_script import run


def main(snakemake):
    out = snakemake.output
    facts = pd.DataFrame(snakemake.params.facts, columns=FACT_COLUMNS)
    claims = dict(zip(facts["cell"], map(pd.read_parquet, snakemake.input.claims)))
    seeds = dict(zip(facts["cell"], map(pd.read_parquet, snakemake.input.seeds)))
    write_scaling(scaling_table(claims, facts, seeds), out.csv, out.md, paired_trends(seeds, facts), out.trends)


run(snakemake, main)

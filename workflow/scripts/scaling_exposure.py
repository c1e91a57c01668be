import pandas as pd

from tying.rule_script import run
from tying.sweep import exposure_by_cell, write_exposure_by_cell


def main(snakemake):
    facts = pd.DataFrame(snakemake.params.facts)
    tables = dict(zip(facts["cell"], map(pd.read_csv, snakemake.input)))
    write_exposure_by_cell(exposure_by_cell(tables, facts), snakemake.output.csv, snakemake.output.md)


run(snakemake, main)

import pandas as pd

from tying.claims.exposure import write_exposure_table
from tying.claims.scaling import EXPOSURE_COLUMNS, exposure_by_cell
from tying.rule_script import run


def main(snakemake):
    facts = pd.DataFrame(snakemake.params.facts)
    tables = dict(zip(facts["cell"], map(pd.read_csv, snakemake.input)))
    write_exposure_table(exposure_by_cell(tables, facts), snakemake.output.csv, snakemake.output.md, EXPOSURE_COLUMNS)


run(snakemake, main)

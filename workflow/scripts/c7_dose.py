import pandas as pd

from tying.claims.c7_dose import dose_seed_values, dose_table, write_dose_table
from tying.report.figures.c7_dose import plot_c7_dose
from tying.rule_script import run
from tying.tidy import read_frames


def main(snakemake):
    inp, out, p = snakemake.input, snakemake.output, snakemake.params
    provenance = {(v, int(s)): pd.read_parquet(f) for (v, s), f in zip(p.runs, inp.provenance)}
    values = dose_seed_values(
        read_frames(inp.scaling), read_frames(inp.quality), provenance, p.doses, p.pair, read_frames(inp.reference)
    )
    table = dose_table(values)
    write_dose_table(table, out.csv, out.md)
    plot_c7_dose(table, out.figure)


run(snakemake, main)

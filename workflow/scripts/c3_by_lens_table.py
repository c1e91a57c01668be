import pandas as pd

from tying.claims.lens_budget import c3_by_lens, comparisons_text, states_by_lens, write_c3_by_lens
from tying.rule_script import run


def main(snakemake):
    sweeps = pd.concat([pd.read_parquet(path) for path in snakemake.input], ignore_index=True)
    comparisons = [{**c, "a": tuple(c["a"]), "b": tuple(c["b"])} for c in snakemake.params.comparisons]
    out = snakemake.output
    write_c3_by_lens(c3_by_lens(sweeps, comparisons), states_by_lens(sweeps, comparisons),
                     comparisons_text(snakemake.params.described), out.table, out.states, out.md)


run(snakemake, main)

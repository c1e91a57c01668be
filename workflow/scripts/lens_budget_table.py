import pandas as pd

from tying.claims.lens_budget import c3_by_state, lens_budget_table, states_by_lens, write_lens_budget
from tying.rule_script import run


def main(snakemake):
    sweeps = pd.concat([pd.read_parquet(path) for path in snakemake.input], ignore_index=True)
    comparisons = [{**c, "a": tuple(c["a"]), "b": tuple(c["b"])} for c in snakemake.params.comparisons]
    lens = snakemake.params.lens
    write_lens_budget(
        lens_budget_table(sweeps, comparisons, lens),
        c3_by_state(sweeps, comparisons, lens),
        states_by_lens(sweeps, comparisons, lens),
        snakemake.params.described,
        lens,
        dict(snakemake.output.items()),
    )


run(snakemake, main)

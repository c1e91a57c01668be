import pandas as pd

from tying.data.token_sets import write_token_set
from tying.rule_script import run


def main(snakemake):
    inp, out, p = snakemake.input, snakemake.output, snakemake.params
    write_token_set(
        pd.read_parquet(inp.counts),
        [pd.read_parquet(f) for f in inp.drawn],
        p.step,
        p.min_count,
        out.tokens,
        out.by_step,
    )


run(snakemake, main)

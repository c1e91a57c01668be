import pandas as pd

from tying.rule_script import run
from tying.token_sets import write_token_set
from tying.tokens import load_ids


def main(snakemake):
    inp, p = snakemake.input, snakemake.params
    write_token_set(load_ids(inp.train, inp.meta), pd.read_parquet(inp.counts), p.runs, p.min_count,
                    snakemake.output[0])


run(snakemake, main)

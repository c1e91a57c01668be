import pandas as pd

from tying.data.token_sets import write_drawn
from tying.data.tokens import load_ids
from tying.rule_script import run


def main(snakemake):
    inp, w = snakemake.input, snakemake.wildcards
    vocab = int(pd.read_parquet(inp.counts, columns=["token_id"])["token_id"].max()) + 1
    run_shape = tuple(int(w[k]) for k in ("seed", "steps", "batch", "seq_len"))
    write_drawn(load_ids(inp.train, inp.meta), vocab, run_shape, snakemake.params.at, snakemake.output[0])


run(snakemake, main)

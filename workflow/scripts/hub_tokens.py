import pandas as pd

from tying.script import run
from tying.tokenizer import pretrained
from tying.tokens import tokenize_corpus


def main(snakemake):
    out = snakemake.output
    tok = pretrained(snakemake.input.model)
    tokenize_corpus(pd.read_parquet(snakemake.input.documents), tok, out.train, out.val, out.meta, out.counts)


run(snakemake, main)

from tying.data import tokenizer
from tying.rule_script import run
from tying.data.tokens import tokenize_documents


def main(snakemake):
    tok = tokenizer.load(snakemake.input.tokenizer)
    out = snakemake.output
    tokenize_documents([snakemake.input.documents], tok, out.train, out.val, out.meta, out.counts)


run(snakemake, main)

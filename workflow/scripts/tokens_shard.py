from tying.data import tokenizer
from tying.data.tokens import tokenize_documents
from tying.rule_script import run


def main(snakemake):
    tok = tokenizer.load(snakemake.input.tokenizer)
    out = snakemake.output
    tokenize_documents([snakemake.input.documents], tok, out.train, out.val, out.meta, out.counts)


run(snakemake, main)

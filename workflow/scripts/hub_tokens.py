from tying.data.tokenizer import pretrained
from tying.data.tokens import tokenize_documents
from tying.rule_script import run


def main(snakemake):
    out = snakemake.output
    tok = pretrained(snakemake.input.model)
    tokenize_documents(snakemake.input.documents, tok, out.train, out.val, out.meta, out.counts)


run(snakemake, main)

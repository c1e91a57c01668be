from tying.corpus import build_corpus
from tying.io import write_parquet
from tying.script import run


def main(snakemake):
    documents = build_corpus(snakemake.params.corpus)
    write_parquet(documents, snakemake.output.documents)


run(snakemake, main)

from tying.script import run
from tying.shards import shard_documents, write_documents


def main(snakemake):
    cfg = snakemake.params.corpus
    write_documents(shard_documents(cfg, snakemake.params.shard), snakemake.output.documents, cfg["val_fraction"])


run(snakemake, main)

import sys

from tying.data.corpus import Digest, distribution_versions
from tying.data.shards import block, shard_documents, write_documents
from tying.rule_script import run


def main(snakemake):
    cfg, shard = snakemake.params.corpus, snakemake.params.shard
    documents = Digest(shard_documents(cfg, shard))
    counts = write_documents(documents, snakemake.output.documents, cfg["val_fraction"])
    source = cfg["source"]
    if source == "docstrings":
        source += " of " + distribution_versions(block(list(cfg["distributions"]), cfg.get("shards", 1), shard))
    print(
        f"corpus shard {shard} ({source}): {documents.summary()}; {counts['train']:,} train, {counts['val']:,} val",
        file=sys.stderr,
    )


run(snakemake, main)

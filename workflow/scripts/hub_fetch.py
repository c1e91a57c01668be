from tying.hub.fetch import fetch_model
from tying.rule_script import run


def main(snakemake):
    fetch_model(
        snakemake.wildcards.repo,
        snakemake.wildcards.revision,
        snakemake.output[0],
        embeddings_only=snakemake.params.embeddings_only,
    )


run(snakemake, main)

from transformers import AutoTokenizer

from tying.hub import fetch_model
from tying.io import atomic_path
from tying.script import run


def main(snakemake):
    w = snakemake.wildcards
    with atomic_path(snakemake.output[0]) as tmp:
        fetch_model(w.repo, w.revision, tmp, embeddings_only=snakemake.params.embeddings_only)
        if not (tmp / "tokenizer.json").is_file():  # e.g. gpt-neo-2.7B ships only vocab.json + merges.txt
            AutoTokenizer.from_pretrained(tmp).backend_tokenizer.save(str(tmp / "tokenizer.json"))


run(snakemake, main)

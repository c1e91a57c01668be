import pandas as pd

from tying import tokenizer
from tying.script import run


def main(snakemake):
    cfg = snakemake.params.tokenizer
    if cfg.get("pretrained"):
        tok = tokenizer.pretrained(cfg["pretrained"])
    else:
        docs = pd.read_parquet(snakemake.input.documents)
        tok = tokenizer.train_bpe(docs.loc[docs["split"] == "train", "text"], cfg["vocab_size"])
    tokenizer.save(tok, snakemake.output.tokenizer)


run(snakemake, main)

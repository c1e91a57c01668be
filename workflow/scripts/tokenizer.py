from tying.data import tokenizer
from tying.data.shards import read_texts
from tying.rule_script import run


def main(snakemake):
    cfg = snakemake.params.tokenizer
    if cfg.get("pretrained"):
        tok = tokenizer.pretrained(cfg["pretrained"])
    else:
        tok = tokenizer.train_bpe(read_texts(snakemake.input.documents, "train"), cfg["vocab_size"])
    tokenizer.save(tok, snakemake.output.tokenizer)


run(snakemake, main)

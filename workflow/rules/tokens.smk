# One tokenization job per corpus shard, then a join that lists the shards' arrays (no copy).
from tying.config import model_dims


def token_plan():
    """The join's line in a dry run: how many shards, and how many tokens each training run draws
    (steps x batch x sequence) beside the corpus's budget."""
    train, corpus = config["train"], config["corpus"]
    seq_len = max(model_dims(config, arch)["seq_len"] for arch in config["architectures"])
    drawn = train["steps"] * train["batch_size"] * seq_len
    budget = f"; the corpus streams up to {corpus['max_tokens']:,} words" if "max_tokens" in corpus else ""
    return (f"join {len(CORPUS_SHARDS)} token shard(s): each training run draws {train['steps']} x "
            f"{train['batch_size']} x {seq_len} = {drawn:,} tokens{budget} (the job prints the train split's tokens)")


rule tokens_shard:
    input:
        documents=rules.corpus.output.documents,
        tokenizer=rules.tokenizer.output.tokenizer,
    output:
        train="results/tokens/shard{shard}/train.bin",
        val="results/tokens/shard{shard}/val.bin",
        meta="results/tokens/shard{shard}/meta.json",
        counts="results/tokens/shard{shard}/counts.parquet",
    log:
        "logs/tokens/shard{shard}.log",
    benchmark:
        "results/benchmarks/tokens/shard{shard}.tsv"
    resources:
        mem_mb=4000,
        runtime=120,
    threads: 1
    wildcard_constraints:
        shard=r"\d+",
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/tokens_shard.py"


rule tokens:
    input:
        **{k: expand(rules.tokens_shard.output[k], shard=CORPUS_SHARDS) for k in ("train", "val", "meta", "counts")},
    output:
        train="results/tokens/train.json",
        val="results/tokens/val.json",
        meta="results/tokens/meta.json",
        counts="results/tokens/counts.parquet",
    message:
        token_plan()
    log:
        "logs/tokens.log",
    benchmark:
        "results/benchmarks/tokens.tsv"
    resources:
        mem_mb=2000,
        runtime=10,
    threads: 1
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/tokens.py"

# One tokenization job per corpus shard, then a join that lists the shards' arrays (no copy).


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
        token_plan(config)
    log:
        "logs/tokens.log",
    benchmark:
        "results/benchmarks/tokens.tsv"
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/tokens.py"


rule token_set:
    input:
        train=rules.tokens.output.train,
        meta=rules.tokens.output.meta,
        counts=rules.tokens.output.counts,
    output:
        "results/token_sets/{pair}/seed{seed}.parquet",
    params:
        runs=lambda w: token_set_runs(config, w.pair, w.seed),
        min_count=config["analysis"]["min_count"],
    log:
        "logs/token_sets/{pair}/seed{seed}.log",
    benchmark:
        "results/benchmarks/token_sets/{pair}/seed{seed}.tsv"
    resources:
        runtime=30,
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/token_set.py"

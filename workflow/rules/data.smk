# The data: the corpus in `corpus.shards` shards, one job each (a cluster streams them in parallel), the
# tokenizer, one tokenization job per shard, then a join that lists the shards' arrays (no copy); how often each run
# shape drew each token, and each trained pair's analysed-token set from those counts.
from tying.plan.pairs import drawn_steps, token_set_runs
from tying.plan.runs import token_plan

CORPUS_SHARDS = list(range(config["corpus"]["shards"]))


rule corpus:
    output:
        documents="results/corpus/shard{shard}.parquet",
    params:
        corpus=config["corpus"],
        shard=lambda w: int(w.shard),
    log:
        "logs/corpus/shard{shard}.log",
    resources:
        runtime=120,
    wildcard_constraints:
        shard=r"\d+",
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/corpus.py"


rule tokenizer:
    input:
        documents=corpus_shards(),
    output:
        tokenizer=directory("results/tokenizer"),
    params:
        tokenizer=config["tokenizer"],
    log:
        "logs/tokenizer.log",
    resources:
        mem_mb=4000,
        runtime=60,
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/tokenizer.py"


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
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/tokens.py"


rule drawn:
    input:
        train=rules.tokens.output.train,
        meta=rules.tokens.output.meta,
        counts=rules.tokens.output.counts,
    output:
        "results/drawn/seed{seed}/steps{steps}_batch{batch}_len{seq_len}.parquet",
    params:
        at=lambda w: drawn_steps(config, int(w.steps)),
    log:
        "logs/drawn/seed{seed}/steps{steps}_batch{batch}_len{seq_len}.log",
    resources:
        runtime=30,
    wildcard_constraints:
        steps=r"\d+",
        batch=r"\d+",
        seq_len=r"\d+",
    group:
        "draws_seed{seed}"
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/drawn.py"


rule token_set:
    input:
        counts=rules.tokens.output.counts,
        drawn=lambda w: [
            expand(rules.drawn.output[0], seed=s, steps=n, batch=b, seq_len=q)[0]
            for s, n, b, q in token_set_runs(config, w.pair, w.seed)
        ],
    output:
        tokens="results/token_sets/{pair}/seed{seed}.parquet",
        by_step="results/token_sets/{pair}/seed{seed}_by_step.parquet",
    params:
        step=lambda w: pair_step(config, w.pair),
        min_count=config["analysis"]["min_count"],
    log:
        "logs/token_sets/{pair}/seed{seed}.log",
    group:
        "metrics_{pair}_seed{seed}"
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/token_set.py"

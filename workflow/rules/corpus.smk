# The corpus in `corpus.shards` shards, one job each (a cluster streams them in parallel).


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

rule corpus:
    output:
        documents="results/corpus/documents.parquet",
    params:
        corpus=config["corpus"],
    log:
        "logs/corpus.log",
    benchmark:
        "results/benchmarks/corpus.tsv"
    resources:
        mem_mb=2000,
        runtime=30,
    threads: 1
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/corpus.py"

rule tokens:
    input:
        documents=rules.corpus.output.documents,
        tokenizer=rules.tokenizer.output.tokenizer,
    output:
        train="results/tokens/train.bin",
        val="results/tokens/val.bin",
        meta="results/tokens/meta.json",
        counts="results/tokens/counts.parquet",
    log:
        "logs/tokens.log",
    benchmark:
        "results/benchmarks/tokens.tsv"
    resources:
        mem_mb=4000,
        runtime=60,
    threads: 1
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/tokens.py"

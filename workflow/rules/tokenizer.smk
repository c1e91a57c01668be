rule tokenizer:
    input:
        documents=rules.corpus.output.documents,
    output:
        tokenizer=directory("results/tokenizer"),
    params:
        tokenizer=config["tokenizer"],
    log:
        "logs/tokenizer.log",
    benchmark:
        "results/benchmarks/tokenizer.tsv"
    resources:
        mem_mb=4000,
        runtime=60,
    threads: 1
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/tokenizer.py"

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

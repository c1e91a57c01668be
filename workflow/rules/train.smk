rule train:
    input:
        train=rules.tokens.output.train,
        val=rules.tokens.output.val,
        meta=rules.tokens.output.meta,
        tokenizer=rules.tokenizer.output.tokenizer,
    output:
        checkpoints=[
            directory(checkpoint_dir("{arch}", "{variant}", "{seed}", step))
            for step in CHECKPOINT_STEPS
        ],
        log="results/train/{arch}/{variant}/seed{seed}/log.parquet",
        provenance="results/train/{arch}/{variant}/seed{seed}/provenance.parquet",
    params:
        run=lambda w: run_params(config, w.arch, w.variant),
        work_dir=lambda w: f"results/train/{w.arch}/{w.variant}/seed{w.seed}/work",
        log_every=config["train"]["log_every"],
        device=config["train"]["device"],
        nproc=config["train"]["nproc"],
    log:
        "logs/train/{arch}/{variant}/seed{seed}.log",
    benchmark:
        "results/benchmarks/train/{arch}/{variant}/seed{seed}.tsv"
    resources:
        mem_mb=4000,
        runtime=120,
        gpu=config["train"]["nproc"] if config["train"]["device"] == "cuda" else 0,
    threads: config["train"]["threads"]
    wildcard_constraints:
        seed=r"\d+",
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/train.py"

# Tuned lens per model of a pair (Figures 2, 6, 7; claim C3).
from tying.plan.claims import matched_null

LENS_RESOURCES = {"mem_mb": 8000, "runtime": 60, "gpu": 1 if config["lens"]["device"] == "cuda" else 0}


rule lens:
    input:
        unpack(lambda w: lens_inputs(w.pair, w.role, int(w.seed))),
        given=lambda w: given_lens(w.pair, w.role),
    output:
        metric="results/metrics/lens/{pair}/{role}/seed{seed}.parquet",
        # per validation window: the tuned lens's KL by state, and at 3/4 of its steps (C3's check)
        windows="results/metrics/lens/{pair}/{role}/seed{seed}.windows.parquet",
        weights="results/lens/{pair}/{role}/seed{seed}.safetensors",
        # the same lens as tuned-lens 0.2 saves one (tying.lens.tuned_lens_format)
        tuned_lens=directory("results/lens/{pair}/{role}/seed{seed}.tuned-lens"),
    params:
        ref=lambda w: PAIRS[w.pair][w.role],
        ids=lambda w: {
            "pair": w.pair,
            "role": w.role,
            "model": reference(PAIRS[w.pair][w.role]).name,
            "seed": int(w.seed),
        },
        lens=config["lens"],
    log:
        "logs/lens/{pair}/{role}/seed{seed}.log",
    resources:
        **LENS_RESOURCES,
    threads: config["lens"]["threads"]
    wildcard_constraints:
        role="tied|untied",
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/lens.py"


# The claims pair's matched null (tying.plan.claims.matched_null): the lens job on its second untied run, whose KL
# against the pair's untied model C3's and C3s0's detail give.
use rule lens as lens_null with:
    input:
        unpack(lambda w: null_lens_inputs(w.pair, int(w.seed))),
        given=[],
    output:
        metric="results/metrics/lens/{pair}/null/seed{seed}.parquet",
        windows="results/metrics/lens/{pair}/null/seed{seed}.windows.parquet",
        weights="results/lens/{pair}/null/seed{seed}.safetensors",
        tuned_lens=directory("results/lens/{pair}/null/seed{seed}.tuned-lens"),
    params:
        ref=lambda w: matched_null(config, w.pair),
        ids=lambda w: {
            "pair": w.pair,
            "role": "null",
            "model": reference(matched_null(config, w.pair)).name,
            "seed": int(w.seed),
        },
        lens=config["lens"],
    log:
        "logs/lens/{pair}/null/seed{seed}.log",


rule lens_convergence:
    input:
        unpack(lambda w: lens_inputs(w.pair, w.role, int(w.seed))),
        metric=rules.lens.output.metric,
    output:
        # held-out KL per state of the lens job's lens and of a reference lens trained for 4x its steps
        "results/metrics/lens/{pair}/{role}/seed{seed}.convergence.parquet",
    params:
        ids=rules.lens.params.ids,
        lens=config["lens"],
    log:
        "logs/lens/{pair}/{role}/seed{seed}.convergence.log",
    resources:
        **LENS_RESOURCES,
    threads: config["lens"]["threads"]
    wildcard_constraints:
        role="tied|untied",
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/lens_convergence.py"


# The embedding's share of each state the lens reads (tying.lens.residual_share), on the lens's held-out windows;
# C3 against width reads it (tying.plan.c3_by_width).
rule residual_share:
    input:
        unpack(lambda w: lens_inputs(w.pair, w.role, int(w.seed))),
    output:
        "results/metrics/residual_share/{pair}/{role}/seed{seed}.parquet",
    params:
        ids=rules.lens.params.ids,
        lens={key: config["lens"][key] for key in ("device", "dtype", "seq_len", "batch_size", "eval_batches")},
    log:
        "logs/metrics/residual_share/{pair}/{role}/seed{seed}.log",
    resources:
        **LENS_RESOURCES,
    threads: config["lens"]["threads"]
    wildcard_constraints:
        role="tied|untied",
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/metric_residual_share.py"


# A local pair's LM row: each model's validation loss on the corpus in its own tokenizer, beside the unigram and
# bigram tables of the training split in that tokenizer (tying.metrics.local_quality), on the lens's windows.
rule local_quality:
    input:
        unpack(lambda w: local_quality_inputs(w.pair)),
    output:
        "results/metrics/local_quality/{pair}/seed{seed}.parquet",
    params:
        ids=lambda w: {"pair": w.pair, "seed": int(w.seed)},
        lens=config["lens"],
    log:
        "logs/metrics/local_quality/{pair}/seed{seed}.log",
    resources:
        **LENS_RESOURCES,
    threads: config["lens"]["threads"]
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/local_quality.py"

# One rule per metric; each writes tidy Parquet per (pair, seed) under results/metrics/.
from tying.plan.pairs import (downstream_runs, drawn_steps, early_steps, evolution_models, initial_models,
                              local_tokenizers, quality_runs, scaled_models, scaled_variants, scaling_steps)
from tying.plan.references import checkpoint_dir, trained_control_dir
from tying.plan.runs import run_shape


rule trained_control:
    input:
        lambda w: checkpoint_dir(w.arch, w.variant, w.seed, w.step),
    output:
        directory(trained_control_dir("{arch}", "{variant}", "{seed}", "{step}", "{matrix}")),
    log:
        "logs/controls/{arch}/{variant}/seed{seed}/step{step}/{matrix}.log",
    resources:
        mem_mb=lambda w, input: request_mb("control", input, 2000),
    wildcard_constraints:
        step=r"\d+",
        matrix="input|output|mixture",
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/control.py"


rule alignment:
    input:
        unpack(metric_models),
    output:
        "results/metrics/alignment/{pair}/seed{seed}.parquet",
    params:
        ids=metric_ids,
        analysis=lambda w: analysis_params(config, w.pair, "rows", "held_out", "split_seed"),
    log:
        "logs/metrics/alignment/{pair}/seed{seed}.log",
    resources:
        mem_mb=lambda w, input: request_mb("alignment", [input.untied, input.tied], 4000),
        runtime=30,
    group:
        "metrics_{pair}_seed{seed}"
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/metric_alignment.py"


rule knn:
    input:
        unpack(metric_models),
    output:
        "results/metrics/knn/{pair}/seed{seed}.parquet",
    params:
        ids=metric_ids,
        analysis=lambda w: analysis_params(config, w.pair, "rows", "split_seed"),
        knn_k=config["analysis"]["knn_k"],
        approximate=config["analysis"]["knn_approximate"],
    log:
        "logs/metrics/knn/{pair}/seed{seed}.log",
    resources:
        mem_mb=lambda w, input: request_mb("knn", [input.untied, input.tied], 4000),
        runtime=30,
    group:
        "metrics_{pair}_seed{seed}"
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/metric_knn.py"


rule scaling:
    input:
        unpack(lambda w: token_set(w.pair, w.seed)),
        untied=lambda w: [
            pair_models(config, w.pair, int(w.seed), s)["untied"] for s in scaling_steps(config, w.pair)
        ],
        tied=lambda w: [
            d for s in scaling_steps(config, w.pair) for d in scaled_models(config, w.pair, int(w.seed), s).values()
        ],
    output:
        "results/metrics/scaling/{pair}/seed{seed}.parquet",
        tokens="results/metrics/scaling_tokens/{pair}/seed{seed}.parquet",
    params:
        ids=lambda w: {"pair": w.pair, "seed": int(w.seed)},
        analysis=lambda w: analysis_params(config, w.pair, "rows", "held_out", "split_seed"),
        steps=lambda w: scaling_steps(config, w.pair),
        variants=lambda w: scaled_variants(config, w.pair),
    log:
        "logs/metrics/scaling/{pair}/seed{seed}.log",
    resources:
        mem_mb=lambda w, input: request_mb("scaling", [*input.untied, *input.tied], 4000, held=2),
        runtime=30,
    group:
        "metrics_{pair}_seed{seed}"
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/metric_scaling.py"


rule evolution:
    input:
        unpack(lambda w: token_set(w.pair, w.seed) | local_tokenizers(config, w.pair, ("untied",))),
        checkpoints=lambda w: list(evolution_models(config, w.pair, int(w.seed)).values()),
    output:
        "results/metrics/evolution/{pair}/seed{seed}.parquet",
        tokens="results/metrics/evolution_tokens/{pair}/seed{seed}.parquet",
    params:
        ids=lambda w: {"run": w.pair, "seed": int(w.seed)},
        steps=lambda w: list(evolution_models(config, w.pair, int(w.seed))),
        analysis=lambda w: analysis_params(config, w.pair, "rows"),
    log:
        "logs/metrics/evolution/{pair}/seed{seed}.log",
    resources:
        mem_mb=lambda w, input: request_mb("evolution", input.checkpoints, 4000, held=3),
        runtime=30,
    group:
        "metrics_{pair}_seed{seed}"
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/metric_evolution.py"


rule grad_flow:
    input:
        provenance=lambda w: expand(
            rules.train.output.provenance, **PAIRS[w.pair]["tied"], seed=w.seed
        ),
    output:
        "results/metrics/grad_flow/{pair}/seed{seed}.parquet",
    params:
        ids=lambda w: {"pair": w.pair, "seed": int(w.seed), "variant": PAIRS[w.pair]["tied"]["variant"]},
        steps=lambda w: max(config["analysis"]["grad_flow_steps"], early_steps(config, w.pair)),
    log:
        "logs/metrics/grad_flow/{pair}/seed{seed}.log",
    group:
        "metrics_{pair}_seed{seed}"
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/metric_grad_flow.py"


rule norm_freq:
    input:
        unpack(metric_models),
        initial=lambda w: list(initial_models(config, w.pair, int(w.seed)).values()),
    output:
        "results/metrics/norm_freq/{pair}/seed{seed}.parquet",
    params:
        ids=lambda w: {"pair": w.pair, "seed": int(w.seed)},
        analysis=lambda w: analysis_params(config, w.pair, "rows"),
    log:
        "logs/metrics/norm_freq/{pair}/seed{seed}.log",
    resources:
        mem_mb=lambda w, input: request_mb("norm_freq", [input.untied, input.tied, *input.initial], 4000),
    group:
        "metrics_{pair}_seed{seed}"
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/metric_norm_freq.py"


rule baseline:
    input:
        train=rules.tokens.output.train,
        val=rules.tokens.output.val,
        meta=rules.tokens.output.meta,
    output:
        "results/baselines/seed{seed}/steps{steps}_batch{batch}_len{seq_len}.parquet",
    params:
        at=lambda w: drawn_steps(config, int(w.steps)),
        eval_batches=config["train"]["eval_batches"],
    log:
        "logs/baselines/seed{seed}/steps{steps}_batch{batch}_len{seq_len}.log",
    wildcard_constraints:
        steps=r"\d+",
        batch=r"\d+",
        seq_len=r"\d+",
    group:
        "draws_seed{seed}"
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/baseline.py"


rule quality:
    input:
        unpack(quality_inputs),
    output:
        "results/metrics/quality/{pair}/seed{seed}.parquet",
    params:
        ids=lambda w: {"pair": w.pair, "seed": int(w.seed)},
        runs=lambda w: quality_runs(config, w.pair),
    log:
        "logs/metrics/quality/{pair}/seed{seed}.log",
    group:
        "metrics_{pair}_seed{seed}"
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/metric_quality.py"


rule loss:
    input:
        logs=lambda w: [
            expand(rules.train.output.log, arch=a, variant=v, seed=s)[0]
            for a, v, s in downstream_runs(config)
        ],
        baselines=lambda w: [
            baseline_file(run_shape(config, a, s, schedule(config, a).final))
            for a, v, s in downstream_runs(config)
        ],
    output:
        "results/metrics/loss.parquet",
    params:
        runs=lambda w: downstream_runs(config),
    log:
        "logs/metrics/loss.log",
    group:
        "tables"
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/metric_loss.py"

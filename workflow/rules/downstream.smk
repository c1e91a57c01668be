# Table 7's downstream numbers for every run it reports, at the final step: perplexity on a held-out
# text (downstream.perplexity; the paper: WikiText-2) and zero-shot accuracies through lm-eval
# (downstream.lm_eval; the `eval` extra). Without a `downstream` section Table 7 shows held-out loss.
from tying.plan.pairs import downstream_runs
from tying.plan.references import checkpoint_dir
from tying.plan.runs import model_dims

DOWNSTREAM = config.get("downstream", {})


localrules:
    downstream_text,


rule downstream_text:
    output:
        "results/downstream/text.txt",
    params:
        text=DOWNSTREAM.get("perplexity"),
    log:
        "logs/downstream/text.log",
    resources:
        network=1,
        runtime=30,
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/downstream_text.py"


rule perplexity:
    input:
        model=lambda w: checkpoint_dir(w.arch, w.variant, w.seed, FINAL_STEP),
        text=rules.downstream_text.output[0],
    output:
        "results/metrics/perplexity/{arch}/{variant}/seed{seed}.parquet",
    params:
        ids=downstream_ids,
        label=DOWNSTREAM.get("perplexity", {}).get("label"),
        seq_len=lambda w: DOWNSTREAM["perplexity"].get("seq_len") or model_dims(config, w.arch)["seq_len"],
        batch_size=DOWNSTREAM.get("perplexity", {}).get("batch_size"),
        device=DOWNSTREAM.get("device"),
        dtype=DOWNSTREAM.get("dtype"),
    log:
        "logs/metrics/perplexity/{arch}/{variant}/seed{seed}.log",
    resources:
        mem_mb=8000,
        runtime=60,
        gpu=1 if DOWNSTREAM.get("device") == "cuda" else 0,
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/metric_perplexity.py"


rule lm_eval:
    input:
        model=lambda w: checkpoint_dir(w.arch, w.variant, w.seed, FINAL_STEP),
    output:
        "results/metrics/lm_eval/{arch}/{variant}/seed{seed}.parquet",
    params:
        ids=downstream_ids,
        lm_eval=DOWNSTREAM.get("lm_eval"),
        device=DOWNSTREAM.get("device"),
        dtype=DOWNSTREAM.get("dtype"),
    log:
        "logs/metrics/lm_eval/{arch}/{variant}/seed{seed}.log",
    resources:
        network=1,
        mem_mb=16000,
        runtime=240,
        gpu=1 if DOWNSTREAM.get("device") == "cuda" else 0,
    conda:
        "../envs/eval.yaml"
    script:
        "../scripts/metric_lm_eval.py"

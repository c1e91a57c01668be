# The survey of released models (configs/survey.yaml): results/tables/survey.{csv,md} and
# figures/survey.pdf over every comparison in `survey.comparisons`, negative controls included.
# Each model is fetched once per revision by hub_embeddings (embeddings only); the metrics are
# the alignment and knn rules'. The table names each model by the commit its fetch read (its
# source.json; a control's, its source model's). A comparison with a gated model (`survey.gated`)
# runs only when a Hugging Face token is available (HF_TOKEN or `huggingface-cli login`); otherwise
# it is listed as not run and nothing of it is fetched.

if SURVEY.get("comparisons") and not survey_pairs()[0]:
    sys.exit("config error: every survey comparison reads a gated model (survey.gated) and no Hugging Face "
             "token was found: set HF_TOKEN or run `huggingface-cli login`")


rule survey_control:
    input:
        lambda w: hub_dir(w.repo, w.revision),
    output:
        directory(control_dir("{repo}", "{revision}", "{matrix}")),
    log:
        "logs/survey/controls/{repo}/{revision}/{matrix}.log",
    benchmark:
        "results/benchmarks/survey/controls/{repo}/{revision}/{matrix}.tsv"
    resources:
        mem_mb=8000,
        runtime=10,
    threads: 1
    wildcard_constraints:
        repo=r"[^/]+/[^/]+",
        revision=r"[^/]+",
        matrix="input|output",
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/control.py"


rule survey_table:
    input:
        alignment=lambda w: [f for p in survey_pairs()[0] for f in per_seed(rules.alignment.output[0], p)],
        knn=lambda w: [f for p in survey_pairs()[0] for f in per_seed(rules.knn.output[0], p)],
        models=lambda w: [d for p in survey_pairs()[0] for d in pair_models(p, 0).values()],
        sources=lambda w: [model_dir(PAIRS[p][role], 0, 0) for p in survey_pairs()[0] for role in ("tied", "untied")],
    output:
        csv=report("results/tables/survey.csv", caption="../report/survey.rst", category="Survey"),
        md="results/tables/survey.md",
    params:
        run=lambda w: [survey_comparison(p) for p in survey_pairs()[0]],
        skipped=lambda w: [survey_comparison(p) for p in survey_pairs()[1]],
        approximate=config["analysis"]["knn_approximate"],
    log:
        "logs/survey/table.log",
    benchmark:
        "results/benchmarks/survey/table.tsv"
    resources:
        mem_mb=8000,
        runtime=20,
    threads: 1
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/survey_table.py"


rule survey_figure:
    input:
        rules.survey_table.output.csv,
    output:
        report("figures/survey.pdf", caption="../report/survey.rst", category="Survey"),
    log:
        "logs/survey/figure.log",
    benchmark:
        "results/benchmarks/survey/figure.tsv"
    resources:
        mem_mb=1000,
        runtime=10,
    threads: 1
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/survey_figure.py"

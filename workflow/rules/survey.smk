# The survey of released models (configs/survey.yaml): results/tables/survey.{csv,md} and
# figures/survey.pdf over every comparison in `survey.comparisons`, negative controls included.
# Each model is fetched once per revision by hub_embeddings (embeddings only); the metrics are
# the alignment and knn rules'. The table names each model by the commit its fetch read (its
# source.json; a control's, its source model's). A comparison with a gated model (`survey.gated`)
# runs only when a Hugging Face token is available (HF_TOKEN or `hf auth login`); otherwise
# it is listed as not run and nothing of it is fetched.
from huggingface_hub import get_token

from tying.plan.references import control_dir, hub_dir
from tying.plan.survey import survey_comparison, survey_pairs

SURVEY = config.get("survey", {})
SURVEY_RUN, SURVEY_SKIPPED = survey_pairs(config, has_token=get_token() is not None)

if SURVEY.get("comparisons") and not SURVEY_RUN:
    sys.exit("config error: every survey comparison reads a gated model (survey.gated) and no Hugging Face "
             "token was found: set HF_TOKEN or run `hf auth login`")


rule survey_control:
    input:
        lambda w: hub_dir(w.repo, w.revision),
    output:
        directory(control_dir("{repo}", "{revision}", "{matrix}")),
    log:
        "logs/survey/controls/{repo}/{revision}/{matrix}.log",
    resources:
        mem_mb=lambda w, input: request_mb("control", input, 8000),
    wildcard_constraints:
        matrix="input|output|mixture",
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/control.py"


rule survey_table:
    input:
        alignment=lambda w: if_built("results/tables/survey.csv", per_seed(rules.alignment, SURVEY_RUN)),
        knn=per_seed(rules.knn, SURVEY_RUN),
        models=[d for p in SURVEY_RUN for d in pair_models(config, p, 0).values()],
        sources=[reference(PAIRS[p][role]).directory(0, 0) for p in SURVEY_RUN for role in ("tied", "untied")],
    output:
        csv=report("results/tables/survey.csv", caption="../report/survey.rst", category="Survey"),
        md="results/tables/survey.md",
    params:
        run=[survey_comparison(config, p) for p in SURVEY_RUN],
        skipped=[survey_comparison(config, p) for p in SURVEY_SKIPPED],
        approximate=config["analysis"]["knn_approximate"],
    log:
        "logs/survey/table.log",
    resources:
        mem_mb=8000,
        runtime=20,
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/survey_table.py"


rule survey_figure:
    input:
        lambda w: if_built("figures/survey.pdf", rules.survey_table.output.csv),
    output:
        report("figures/survey.pdf", caption="../report/survey.rst", category="Survey"),
    log:
        "logs/survey/figure.log",
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/survey_figure.py"

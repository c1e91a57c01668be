# Released checkpoints from the Hugging Face hub at pinned revisions (paper-scale mode).
# hub_embeddings and hub_model are the workflow's only jobs that download weights (download_plan
# reads the hub's metadata; a corpus or tokenizer may come from the hub too): on a cluster they run
# on the submitting host (localrules), and each holds resource `network=1`, so `--resources network=2`
# caps parallel downloads. Building the DAG (and a dry run) never calls the hub: paths come from the config.
from tying.plan.references import hub_dir


localrules:
    hub_embeddings,
    hub_model,
    download_plan,


rule hub_embeddings:
    output:
        directory(hub_dir("{repo}", "{revision}")),
    params:
        embeddings_only=True,
    log:
        "logs/hub/embeddings/{repo}/{revision}.log",
    resources:
        network=1,
        mem_mb=4000,
        runtime=60,
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/hub_fetch.py"


rule hub_model:
    output:
        directory(hub_dir("{repo}", "{revision}", full=True)),
    params:
        embeddings_only=False,
    log:
        "logs/hub/full/{repo}/{revision}.log",
    resources:
        network=1,
        mem_mb=4000,
        runtime=240,
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/hub_fetch.py"


rule hub_tokens:
    input:
        documents=corpus_shards(),
        model=rules.hub_model.output[0],
    output:
        train="results/hub/tokens/{repo}/{revision}/train.bin",
        val="results/hub/tokens/{repo}/{revision}/val.bin",
        meta="results/hub/tokens/{repo}/{revision}/meta.json",
        counts="results/hub/tokens/{repo}/{revision}/counts.parquet",
    log:
        "logs/hub/tokens/{repo}/{revision}.log",
    resources:
        mem_mb=4000,
        runtime=60,
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/hub_tokens.py"


# A local model's own tokenizer over the corpus, for its lens and its LM row: {dir} is the folder holding that
# tokenizer (the model's directory, or its `tokenizer:` folder), absolute without the leading /
# (tying.plan.references: tokens_source), so the models of one tokenizer share the job.
rule local_tokens:
    input:
        documents=corpus_shards(),
        model=lambda w: os.path.join(os.sep, w.dir),
    output:
        train="results/local/tokens/{dir}/train.bin",
        val="results/local/tokens/{dir}/val.bin",
        meta="results/local/tokens/{dir}/meta.json",
        counts="results/local/tokens/{dir}/counts.parquet",
    wildcard_constraints:
        dir=".+",
    log:
        "logs/local/tokens/{dir}.log",
    resources:
        mem_mb=4000,
        runtime=60,
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/hub_tokens.py"


# The bytes every fetch job of every configured target will read, from the hub's file metadata
# (a few small range reads per file; no weights are downloaded).
rule download_plan:
    output:
        tsv="results/hub/download_plan.tsv",
        md="results/hub/download_plan.md",
    params:
        targets=[t for t in all_targets() if not t.endswith(".md")],  # a table's .md: the DAG of its .csv
        snakefile=os.path.join(TYING_DIR, "Snakefile"),
        config=config,
    log:
        "logs/hub/download_plan.log",
    resources:
        network=1,
        runtime=30,
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/hub_download_plan.py"

# Weight tying biases token embeddings towards the output space: the reproduction workflow.
# `snakemake --cores 2 all` builds every figure and table the config enables.

# A --configfile (e.g. configs/paper.yaml) replaces the default config instead of merging into it.
if not workflow.overwrite_configfiles:

    configfile: "config.yaml"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/corpus.smk"
include: "workflow/rules/tokenizer.smk"
include: "workflow/rules/tokens.smk"
include: "workflow/rules/hub.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/metrics.smk"
include: "workflow/rules/lens.smk"
include: "workflow/rules/figures.smk"
include: "workflow/rules/tables.smk"


localrules:
    all,


rule all:
    default_target: True
    input:
        all_targets(),

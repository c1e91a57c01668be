# Weight tying biases token embeddings towards the output space: the reproduction workflow.
# `snakemake --cores 2 all` builds every figure and table the config enables.
import os
import sys

from snakemake.settings.types import DeploymentMethod

# Software (docs/cluster.md, "Software deployment"). Jobs import `tying` from this checkout's src/, whichever
# Python runs them (the venv, a `--sdm conda` environment from workflow/envs/, the container image),
# so none needs the package installed; PYTHONPATH also reaches the processes a job starts (torchrun).
TYING_SRC = os.path.join(workflow.basedir, "src")
sys.path.insert(0, TYING_SRC)
os.environ["PYTHONPATH"] = os.pathsep.join(
    dict.fromkeys([TYING_SRC, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))])
)


# Passed on to jobs that run elsewhere (cluster executors) as well.
envvars:
    "PYTHONPATH",


# `--sdm apptainer` runs every job in the image the Dockerfile builds: $TYING_IMAGE (a docker://
# address or a .sif file), else tying.sif beside this Snakefile.
TYING_IMAGE = os.environ.get("TYING_IMAGE", os.path.join(workflow.basedir, "tying.sif"))
if (
    DeploymentMethod.APPTAINER in workflow.deployment_settings.deployment_method
    and "://" not in TYING_IMAGE
    and not os.path.isfile(TYING_IMAGE)
):
    sys.exit(
        f"error: --sdm apptainer: no image {TYING_IMAGE}; build it (docs/cluster.md, Software deployment) or set TYING_IMAGE"
    )


container: TYING_IMAGE

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
include: "workflow/rules/downstream.smk"
include: "workflow/rules/tables.smk"
include: "workflow/rules/survey.smk"
include: "workflow/rules/trajectory.smk"


localrules:
    all,


rule all:
    default_target: True
    input:
        all_targets(),

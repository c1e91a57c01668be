# Weight tying biases token embeddings towards the output space: the reproduction workflow.
# `snakemake --cores 2 all` builds every figure and table the config enables.
import os
import sys

from snakemake.settings.types import DeploymentMethod

# This checkout: the directory of this file, also where another workflow uses it as a module (`module tying:
# snakefile: .../Snakefile` or .../workflow/Snakefile; docs/configuration.md), whose workflow.basedir is its own.
TYING_DIR = workflow.current_basedir.get_path_or_uri(secret_free=False)

# Software (docs/cluster.md, "Software deployment"). Jobs import `tying` from this checkout's src/, whichever
# Python runs them (the venv, a `--sdm conda` environment from workflow/envs/, the container image),
# so none needs the package installed; PYTHONPATH also reaches the processes a job starts (torchrun).
TYING_SRC = os.path.join(TYING_DIR, "src")
sys.path.insert(0, TYING_SRC)
os.environ["PYTHONPATH"] = os.pathsep.join(
    dict.fromkeys([TYING_SRC, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))])
)


# `--sdm apptainer` runs every job in the image the Dockerfile builds: $TYING_IMAGE (a docker://
# address or a .sif file), else tying.sif beside this Snakefile.
TYING_IMAGE = os.environ.get("TYING_IMAGE", os.path.join(TYING_DIR, "tying.sif"))
if (
    DeploymentMethod.APPTAINER in workflow.deployment_settings.deployment_method
    and "://" not in TYING_IMAGE
    and not os.path.isfile(TYING_IMAGE)
):
    sys.exit(
        f"error: --sdm apptainer: no image {TYING_IMAGE}; build it (docs/cluster.md, Software deployment) or set TYING_IMAGE"
    )


container: TYING_IMAGE

# The config (docs/configuration.md, "Overlays"): config.yaml beside this Snakefile, then each --configfile
# merged over it in order, then --config; --replace-workflow-config drops config.yaml (whole config files).
# Used as a module, the config the using workflow passes (`config: config`) is the one overlay. A local model's
# directory ({path}) is relative to where snakemake starts, as --configfile is; made absolute against it here,
# and handed to the jobs' own snakemake (which start elsewhere) as TYING_LAUNCHDIR. The config is checked
# (tying.plan.config.prepared) before the workdir below is made: a config it refuses leaves no run folder.
from snakemake.utils import min_version
from tying.plan.config import prepared
from tying.errors import PipelineError

min_version("9.0")

if workflow.is_main_process:
    os.environ["TYING_LAUNCHDIR"] = os.getcwd()
_module = workflow.modifier.namespace is not None  # `module tying:` names it; the main workflow has none
try:
    _prepared = prepared(*([] if _module else map(os.path.abspath, workflow.overwrite_configfiles)),
                         overrides=workflow.config_settings.config, passed=dict(config) if _module else None,
                         launch_dir=os.environ.get("TYING_LAUNCHDIR", os.getcwd()),
                         replace=workflow.config_settings.replace_workflow_config)
except PipelineError as err:
    sys.exit(f"config error: {err}")
config.clear()
config.update(_prepared.config)
if workflow.is_main_process:  # what the check found worth saying (the tokens a local pair shares), once a run
    for line in _prepared.lines:
        print(line, file=sys.stderr)

include: "workflow/rules/common.smk"
include: "workflow/rules/inputs.smk"


# Where the outputs go: a config's `workdir` (each configs/*.yaml names its own under runs/, so no config
# overwrites another's results/ and figures/), relative to where snakemake is started; `-d DIR` wins over it.
# The snakemake that plans settles it and hands it to its jobs as an absolute path: a job's own snakemake
# starts wherever its executor puts it (sbatch -D, then an inner srun in the job's directory), so a relative
# path applied again there would nest (runs/smoke/runs/smoke).
if workflow.is_main_process:
    if config.get("workdir"):
        workflow.workdir(config["workdir"])
    os.environ["TYING_WORKDIR"] = os.getcwd()
elif os.environ.get("TYING_WORKDIR"):
    workflow.workdir(os.environ["TYING_WORKDIR"])


# Passed on to jobs that run elsewhere (cluster executors) as well.
envvars:
    "PYTHONPATH",
    "TYING_WORKDIR",
    "TYING_LAUNCHDIR",


report: "workflow/report/workflow.rst"


# The chain, a rule file a stage, then one a study (its tables and figures; docs/pipeline.md).
include: "workflow/rules/data.smk"
include: "workflow/rules/hub.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/metrics.smk"
include: "workflow/rules/lens.smk"
include: "workflow/rules/claims.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/downstream.smk"
include: "workflow/rules/claims_by_exposure.smk"
include: "workflow/rules/claims_by_lookup.smk"
include: "workflow/rules/claims_over_training.smk"
include: "workflow/rules/scaling.smk"
include: "workflow/rules/c3_by_depth.smk"
include: "workflow/rules/c3_by_width.smk"
include: "workflow/rules/lens_budget.smk"
include: "workflow/rules/c7_dose.smk"
include: "workflow/rules/survey.smk"


localrules:
    all,


rule all:
    default_target: True
    input:
        all_targets(),


rule not_built:  # a pair's or run's path that the config lacks (a seed, a step, a pair): its one line, no job
    input:
        lambda w: if_built(w.target),
    output:
        "{target}",
    wildcard_constraints:
        target=unbuilt_pattern(config),

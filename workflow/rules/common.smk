# Config validation and the helpers every rule uses.
import sys

from snakemake.utils import min_version

from tying.config import check, run_params
from tying.errors import PipelineError

min_version("9.0")

try:
    check(config, workflow.source_path("../schemas/config.schema.yaml"))
except PipelineError as err:
    sys.exit(f"config error: {err}")

SEEDS = config["seeds"]
CHECKPOINT_STEPS = sorted(config["train"]["checkpoints"])


def checkpoint_dir(arch, variant, seed, step):
    """The exported save_pretrained directory of one training run at one step."""
    return f"results/checkpoints/{arch}/{variant}/seed{seed}/step{step}"


def all_targets():
    """Every target the config enables."""
    return expand(rules.train.output.log, arch=config["architectures"], variant=config["variants"], seed=SEEDS)

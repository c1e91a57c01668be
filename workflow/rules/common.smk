# What every file of rules uses: the config's pairs and cells, the line for a target the config does not build, and
# per-seed files over a pair's seeds. The config is prepared (layered, typed, checked) by the Snakefile
# (tying.plan.config.prepared); what a pair is comes from tying.plan, and each rule file expands its rules'
# outputs over it; the rules' input and param functions are in inputs.smk.
import sys

from tying.plan.grid import scaling_cells
from tying.plan.memory import request_mb
from tying.plan.pairs import (analysis_params, has_token_set, pair_models, pair_schedule, pair_seeds, pair_step,
                              released_pairs, trained)
from tying.plan.pins import PIN_COMMAND, unpinned_references
from tying.plan.references import reference
from tying.plan.runs import schedule
from tying.plan.targets import lacks, refusal, targets, unbuilt_pattern

wildcard_constraints:  # every rule's {seed} is a number, {repo} a hub repository id, {revision} a branch or commit
    seed=r"\d+",
    repo=r"[^/]+/[^/]+",
    revision=r"[^/]+",

if unpinned_references(config):  # a branch moves: the same config would fetch other weights later
    print(f"warning: hub references not pinned to a commit ({', '.join(unpinned_references(config))}); "
          f"pin them: {PIN_COMMAND}", file=sys.stderr)

PAIRS = config.get("pairs", {})
FINAL_STEP = schedule(config).final
CELLS = scaling_cells(config)  # the scaling grid's cells (tying.plan.grid)


def all_targets():
    """Every figure and table the config enables (tying.plan.targets.targets)."""
    return targets(config)


# --- Targets the config does not build (tying.plan.targets) -----------------------------------------
def if_built(target, inputs=()):
    """`inputs` when the config builds `target`; otherwise the run ends here, while snakemake builds the DAG
    and before any job, with refusal's one line: the config key `target` needs and the configs that build it.
    The line names the command line's target that asked for `target` (a table's Markdown for its CSV: the
    same key), else `target`."""
    key = lacks(config, target)
    if key:
        asked = next((t for t in workflow.dag_settings.targets if lacks(config, t) == key), target)
        sys.exit(refusal(config, asked))
    return inputs


def figure_pair(fig):
    """The pair figures.<fig> draws (if_built: a figure the config leaves out ends the run)."""
    if_built(f"figures/{fig}.pdf")
    return config["figures"][fig]


def table_pairs(table):
    """The pair or pairs tables.<table> reports (if_built: a table the config leaves out ends the run)."""
    if_built(f"results/tables/{table}.csv")
    return config["tables"][table]


# --- Pair wiring: tying.plan.pairs says what a pair is; these expand rule outputs over it ----------------
def per_seed(rule, pairs):
    """A per-seed metric rule's files over the seeds of each of `pairs` (one name or a list), in order."""
    names = [pairs] if isinstance(pairs, str) else pairs
    return [f for p in names for f in expand(rule.output[0], pair=p, seed=pair_seeds(config, p))]


def token_set(pair, seed):
    """{"tokens": the pair's analysed-token set of `seed`} when its metrics keep one, else {}."""
    if not has_token_set(config, pair):
        return {}
    return {"tokens": expand(rules.token_set.output.tokens, pair=pair, seed=seed)[0]}

"""Which figures, tables, pair paths and run paths a config builds, and the one line for a target it does not.

A figure the config leaves out, a seed or a checkpoint step it lacks: asked for by name, such a target would
otherwise meet an input function's KeyError, plan runs the config never names, or find no rule. The rules
(workflow/rules/common.smk) ask `refusal` instead, which names the config key the target needs, the configs
of this checkout that build it and the command that does: from a figure's or table's input function, and
from a rule that matches exactly the pair and run paths the config lacks (`unbuilt_pattern`). A path no rule
makes (figures/fig10.pdf) keeps snakemake's own "No rule to produce".
"""

import re
import string

from tying.errors import PipelineError
from tying.plan import c3_by_width, lens_budget
from tying.plan.config import prepared
from tying.plan.layers import CHECKOUT
from tying.plan.pairs import pair_seeds, trained
from tying.plan.runs import checkpoint_groups

COMMAND = ".venv/bin/snakemake --cores 2"

# Each figure and table file, with the config key that enables it (`n`: the figure's or table's name).
NAMED = (
    (r"figures/(?P<n>fig\d+)\.pdf", "figures: {{{n}: <pair>}}"),
    (
        r"results/tables/(?P<n>table\d+|claims_by_exposure|claims_by_lookup|claims_over_training)\.(?:csv|md)",
        "tables: {{{n}: <pairs>}}",
    ),
    (r"results/tables/(?P<n>claims)\.(?:parquet|md)", "tables: {{{n}: <pairs>}}"),
    (r"figures/(?P<n>claims|claims_by_exposure|claims_over_training)\.pdf", "tables: {{{n}: <pairs>}}"),
    (r"results/tables/scaling(?:_exposure)?\.(?:csv|md)|figures/scaling\.pdf", "scaling: {{sizes: ..., seeds: ...}}"),
    (r"results/tables/c7_dose\.(?:csv|md)|figures/c7_dose\.pdf", "tables: {{c7_dose: <pair>}}"),
    (r"results/tables/c3_by_depth\.(?:csv|md)|figures/c3_by_depth\.pdf", "scaling: {{c3_by_depth: true}}"),
    (r"results/tables/c3_by_width\.(?:csv|md)|figures/c3_by_width\.pdf", "scaling: {{c3_by_width: true}}"),
    (r"results/tables/lens_budget\.(?:parquet|md)|figures/lens_budget\.pdf", "lens_budget: {{comparisons: ...}}"),
    (r"results/tables/survey\.(?:csv|md)|figures/survey\.pdf", "survey: {{comparisons: ...}}"),
)
# The files of one pair's seed, and of one trained run's seed (and step), as the rules write them.
PAIR_PATHS = (
    "results/metrics/{metric}/{pair}/seed{seed}.parquet",
    "results/metrics/lens/{pair}/{role}/seed{seed}.parquet",
    "results/metrics/lens/{pair}/{role}/seed{seed}.windows.parquet",
    "results/metrics/lens/{pair}/{role}/seed{seed}.convergence.parquet",
    "results/metrics/residual_share/{pair}/{role}/seed{seed}.parquet",
    "results/lens/{pair}/{role}/seed{seed}.safetensors",
    "results/token_sets/{pair}/seed{seed}.parquet",
    "results/token_sets/{pair}/seed{seed}_by_step.parquet",
)
RUN_PATHS = (
    "results/checkpoints/{arch}/{variant}/seed{seed}/step{step}",
    "results/controls/{arch}/{variant}/seed{seed}/step{step}/{matrix}",
    "results/train/{arch}/{variant}/seed{seed}/log.parquet",
    "results/train/{arch}/{variant}/seed{seed}/provenance.parquet",
    "results/metrics/{downstream}/{arch}/{variant}/seed{seed}.parquet",
)
NAME = "[A-Za-z0-9_]+"  # the schema's pattern for the names a config gives
WILDCARDS = {
    "metric": "alignment|knn|scaling|scaling_tokens|evolution|evolution_tokens|grad_flow|norm_freq|quality|"
    "local_quality|trajectory",
    "downstream": "perplexity|lm_eval",
    "pair": NAME,
    "arch": NAME,
    "variant": NAME,
    "seed": r"\d+",
    "step": r"\d+",
    "role": "tied|untied",
    "matrix": "input|output|mixture",
}
# The order a path's wildcards are checked in: the first the config lacks is the key the line names.
CHECKED = ("pair", "arch", "variant", "seed", "step")


def targets(config):
    """Every figure and table file `config` enables, in rule all's order."""
    tables = config.get("tables", {})
    files = [f"figures/{fig}.pdf" for fig in config.get("figures", {})]
    files += [f"results/tables/{t}.{ext}" for t in tables if t != "claims" for ext in ("csv", "md")]
    if "claims" in tables:
        files += ["results/tables/claims.parquet", "results/tables/claims.md"]
    files += [
        f"figures/{t}.pdf" for t in ("claims", "claims_over_training", "claims_by_exposure", "c7_dose") if t in tables
    ]
    if "survey" in config:
        files += ["results/tables/survey.csv", "results/tables/survey.md", "figures/survey.pdf"]
    if config.get("scaling"):
        files += [
            "results/tables/scaling.csv",
            "results/tables/scaling.md",
            "figures/scaling.pdf",
            "results/tables/scaling_exposure.csv",
            "results/tables/scaling_exposure.md",
        ]
        if config["scaling"].get("c3_by_depth"):
            files += ["results/tables/c3_by_depth.csv", "results/tables/c3_by_depth.md", "figures/c3_by_depth.pdf"]
    if c3_by_width.built(config):
        files += [f"{c3_by_width.TABLE}.csv", f"{c3_by_width.TABLE}.md", c3_by_width.FIGURE]
    if lens_budget.built(config):
        files += [f"{lens_budget.TABLE}.parquet", f"{lens_budget.TABLE}.md", lens_budget.FIGURE]
    return files


def lacks(config, target):
    """The config key `target` needs and `config` does not have, as YAML (`figures: {fig6: <pair>}`,
    `seeds: [0, 1, 2, 9]`); None when `config` builds `target`, or it is no path of NAMED, PAIR_PATHS, RUN_PATHS."""
    for pattern, key in NAMED:
        match = re.fullmatch(pattern, target)
        if match:
            return None if target in targets(config) else key.format(**match.groupdict())
    for templates, entries in _has(config).items():
        for template in templates:
            match = re.fullmatch(_regex(template, capture=True), target)
            if match:
                return _missing(config, match.groupdict(), entries)
    return None


def unbuilt_pattern(config):
    """A regex matching exactly the pair and run paths `config` lacks (lacks is not None): the wildcard
    constraint of the rule that answers them with `refusal`, so that it never competes for a path the config builds."""
    alternatives = []
    for templates, entries in _has(config).items():
        for template in templates:
            built = "|".join(_regex(template, entry) for entry in entries)
            alternatives.append((f"(?!(?:{built})$)" if built else "") + _regex(template))
    return "|".join(alternatives)


def refusal(config, target):
    """The one line for a `target` that `config` does not build: the key it needs, the configs of this
    checkout that build it and the command that does (or, none building it, where to set the key);
    None when `config` builds it or lacks has no key for it."""
    key = lacks(config, target)
    if key is None:
        return None
    line = f"target error: {target} is not built by this config: it needs {key}; "
    builders = [label for label, other in shipped_configs().items() if lacks(other, target) is None]
    if not builders:
        return line + "no config in configs/ or config.yaml builds it (overlays: docs/configuration.md)"
    overlay = "" if builders[0] == "config.yaml" else f" --configfile {builders[0]}"
    return line + f"{', '.join(builders)} build{'s' if len(builders) == 1 else ''} it: {COMMAND} {target}{overlay}"


def shipped_configs():
    """{label: config} of config.yaml and of each configs/*.yaml laid over it, as `snakemake --configfile` runs them
    (tying.plan.config.prepared), those the check refuses left out: they build nothing yet (configs/trajectory.yaml
    until its trajectory is written)."""
    out = {}
    for path in [None, *sorted((CHECKOUT / "configs").glob("*.yaml"))]:
        try:
            config = prepared(*([path] if path else [])).config
        except PipelineError:
            continue
        out["config.yaml" if path is None else f"configs/{path.name}"] = config
    return out


def _has(config):
    """{templates: [{wildcard: the values config has}]}: one entry per pair (its seeds) for PAIR_PATHS; one per
    training schedule (its architectures, every variant, every seed any pair or lens_budget run has, the steps
    exported) for RUN_PATHS."""
    pairs = [{"pair": [p], "seed": pair_seeds(config, p)} for p in config.get("pairs", {})]
    budget = [run[2] for run in lens_budget.sweep_runs(config)] if lens_budget.built(config) else []
    seeds = sorted({*config["seeds"], *(s for entry in pairs for s in entry["seed"]), *budget})
    runs = [
        {"arch": archs, "variant": list(config["variants"]), "seed": seeds, "step": list(steps)}
        for steps, archs in checkpoint_groups(config).items()
        if archs
    ]
    return {PAIR_PATHS: pairs, RUN_PATHS: runs}


def _regex(template, values=None, capture=False):
    """`template` as a regex: each {wildcard} its WILDCARDS pattern, or the alternation of `values[wildcard]`
    where `values` has it; named groups when `capture`."""
    out = []
    for literal, name, _, _ in string.Formatter().parse(template):
        out.append(re.escape(literal))
        if name is not None:
            pattern = (
                "|".join(re.escape(str(v)) for v in values[name]) if values and name in values else WILDCARDS[name]
            )
            out.append(f"(?P<{name}>{pattern})" if capture else f"(?:{pattern})")
    return "".join(out)


def _missing(config, found, entries):
    """The key for the first of a path's `found` wildcards (CHECKED order) that no entry consistent with
    the ones before it has; None when one entry has them all."""
    for name in (n for n in CHECKED if n in found):
        value = int(found[name]) if name in ("seed", "step") else found[name]
        kept = [entry for entry in entries if value in entry[name]]
        if not kept:
            return _key(config, name, value, found)
        entries = kept
    return None


def _key(config, name, value, found):
    """The config key, as YAML, that gives a path its missing wildcard `name` = `value`."""
    if name in ("pair", "arch", "variant"):
        section = {"pair": "pairs", "arch": "architectures", "variant": "variants"}[name]
        return f"{section}: {{{value}: ...}}"
    if name == "step":
        own = config["architectures"][found["arch"]].get("train", {})
        steps = sorted({*own.get("checkpoints", config["train"]["checkpoints"]), value})
        return (
            f"architectures: {{{found['arch']}: {{train: {{checkpoints: {steps}}}}}}}"
            if "checkpoints" in own
            else f"train: {{checkpoints: {steps}}}"
        )
    pair = config["pairs"].get(found.get("pair"), {})
    if "pair" in found and not trained(config, found["pair"]):
        return f"pairs: {{{found['pair']}: ...}} as runs this pipeline trains (a released pair has seed 0 only)"
    if "seeds" in pair:
        return f"pairs: {{{found['pair']}: {{seeds: {sorted({*pair['seeds'], value})}}}}}"
    return f"seeds: {sorted({*config['seeds'], value})}"

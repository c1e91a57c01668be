"""Config validation with one-line errors, and the derived values rules need."""
import jsonschema
import yaml
from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

from tying.errors import PipelineError
from tying.pairs import (claims_pairs, is_trained, model_dims, pair_schedule, schedule, trained,
                         unwritten_trajectories)

# Targets whose metrics read a pair's tied model, and those that follow its untied model's checkpoints.
NEEDS_TIED = {"fig1", "fig2", "fig4", "fig5", "fig6", "fig7", "table1", "table2", "table5", "table6", "claims"}
NEEDS_EVOLUTION = {"fig3", "fig8", "fig9", "claims"}
# Targets that read what only a pipeline-trained pair has: training logs, gradient provenance, token counts.
NEEDS_TRAINED = {"fig4", "fig5", "table2", "table6", "table7"}
# Targets a trained negative control (pairs.<name>.control) may feed: its tied role is one matrix, not a model.
CONTROL_TARGETS = {"table1", "table5", "claims"}


def check_schema(config, schema_path):
    """Validate `config` against the schema alone (filling its defaults), or raise PipelineError naming the
    key and what is allowed."""
    try:
        validate(config, schema_path)
    except WorkflowError:
        schema = yaml.safe_load(open(schema_path))
        error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(config))
        key = ".".join(map(str, error.absolute_path)) or "(top level)"
        raise PipelineError(f"{key}: {error.message}") from None


def check(config, schema_path):
    """check_schema, then what the schema cannot say (shards, schedules, pairs, survey), as a PipelineError."""
    check_schema(config, schema_path)
    _check_shards(config["corpus"])
    train, runs = config["train"], schedule(config)
    if train["batch_size"] % (train["nproc"] * train["grad_accum"]):
        raise PipelineError(f"train.batch_size: {train['batch_size']} is not a multiple of train.nproc x "
                            f"train.grad_accum ({train['nproc']} x {train['grad_accum']})")
    late = sorted(s for s in runs.checkpoints if s > runs.steps)
    if late:
        raise PipelineError(f"train.checkpoints: {late} exceed train.steps ({runs.steps})")
    for arch in config["architectures"]:
        own = schedule(config, {"arch": arch})
        late = sorted(s for s in own.checkpoints if s > own.steps)
        if late:  # only an architecture's own train entry can get here
            raise PipelineError(f"architectures.{arch}.train.checkpoints: {late} exceed its steps ({own.steps})")
        dims = model_dims(config, arch)
        if dims["hidden_size"] % dims["heads"]:
            raise PipelineError(f"architectures.{arch}: hidden_size {dims['hidden_size']} is not a multiple "
                                f"of heads {dims['heads']}")
    _check_pairs(config)
    _check_survey(config)
    unwritten = unwritten_trajectories(config)
    if unwritten:
        raise PipelineError(f"pairs.{unwritten[0]}.trajectory is empty: write it with python -m tying.revisions "
                            "match (docs/statistics.md, Claims over training)")


def _check_survey(config):
    """Survey comparisons are hub pairs with a tied reference; a negative control (`control`) is a
    survey comparison that no figure or table reads (its tied role is an untied model's matrix)."""
    pairs, surveyed = config.get("pairs", {}), config.get("survey", {}).get("comparisons", {})
    used = {pair for _, pair in _targets(config)}
    for name in surveyed:
        if name not in pairs:
            raise PipelineError(f"survey.comparisons: unknown pair {name!r} (pairs: {', '.join(pairs) or 'none'})")
    for name, pair in pairs.items():
        if name not in surveyed and ("control" not in pair or is_trained(pair.get("tied", {}))):
            continue
        if not all("hub" in pair.get(role, {}) for role in ("tied", "untied")):
            raise PipelineError(f"pairs.{name}: the survey compares a tied and an untied released (hub) model")
        if "control" in pair and (name not in surveyed or name in used):
            raise PipelineError(f"pairs.{name}: a negative control (control: {pair['control']}) is read by the "
                                "survey only; list it in survey.comparisons and in no figure or table")


def _check_shards(corpus):
    """corpus.shards must split the source: stdlib is one part, a local shard is a block of whole files."""
    n = corpus["shards"]
    if n > 1 and corpus["source"] == "stdlib":
        raise PipelineError(f"corpus.shards: {n} shards of the stdlib source, which is one part (use 1)")
    if corpus["source"] == "local" and n > len(corpus["paths"]):
        raise PipelineError(f"corpus.shards: {n} shards of {len(corpus['paths'])} local files "
                            "(a shard is a block of whole files)")


def _check_pairs(config):
    """Cross-references the schema cannot state: names that must exist, steps that must be exported."""
    pairs = config.get("pairs", {})
    for name, pair in pairs.items():
        for role in ("tied", "untied"):
            ref = pair.get(role)
            if ref and is_trained(ref):
                if ref["arch"] not in config["architectures"]:
                    raise PipelineError(f"pairs.{name}.{role}.arch: unknown architecture {ref['arch']!r}")
                if ref["variant"] not in config["variants"]:
                    raise PipelineError(f"pairs.{name}.{role}.variant: unknown variant {ref['variant']!r}")
                wanted = role == "tied" and "control" not in pair  # a control's tied role is an untied run
                if config["variants"][ref["variant"]]["tied"] != wanted:
                    raise PipelineError(f"pairs.{name}.{role}.variant: {ref['variant']!r} is not "
                                        f"{'tied' if wanted else 'untied'}"
                                        + (" (a control's tied role is an untied run)" if "control" in pair else ""))
        for variant in pair.get("scaled", []):
            if not config["variants"].get(variant, {}).get("tied"):
                raise PipelineError(f"pairs.{name}.scaled: {variant!r} is not a tied variant")
        if pair.get("step") is not None and pair["step"] not in pair_schedule(config, name).checkpoints:
            raise PipelineError(f"pairs.{name}.step: {pair['step']} is not one of train.checkpoints")
    for key, pair in _targets(config):
        if pair not in pairs:
            raise PipelineError(f"{key}: unknown pair {pair!r} (pairs: {', '.join(pairs) or 'none'})")
        target = key.split(".")[1]
        if "control" in pairs[pair] and target not in CONTROL_TARGETS:
            raise PipelineError(f"{key}: pair {pair!r} is a negative control, read by "
                                f"{', '.join(sorted(CONTROL_TARGETS))} only")
        if target == "claims" and "control" in pairs[pair] and pair == claims_pairs(config)[0]:
            raise PipelineError(f"{key}: the first claims pair gets every claim; a negative control ({pair!r}) "
                                "can only follow it")
        if target in NEEDS_TRAINED and not trained(config, pair):
            raise PipelineError(f"{key}: pair {pair!r} is released models, and {target} reads what only a pair the "
                                "pipeline trains has (training logs, gradient provenance, token counts)")
        if target in NEEDS_TIED and "tied" not in pairs[pair]:
            raise PipelineError(f"{key}: pair {pair!r} has no tied model, and {target} compares tied with untied")
        further_claims = target == "claims" and pair != claims_pairs(config)[0]  # C1 and C2 only
        if (target in NEEDS_EVOLUTION and not further_claims and not trained(config, pair)
                and "evolution" not in pairs[pair]):
            raise PipelineError(f"{key}: hub pair {pair!r} has no evolution (training step -> revision of its "
                                "untied model)")
    table6 = config.get("tables", {}).get("table6")
    if table6 in pairs and config["analysis"]["early_step"] not in pair_schedule(config, table6).checkpoints:
        raise PipelineError(f"analysis.early_step: {config['analysis']['early_step']} is not one of "
                            "train.checkpoints")


def _targets(config):
    """(config key, pair) for each pair a figure or table reads: ("tables.table1", "main"), ..."""
    wanted = [(f"figures.{k}", v) for k, v in config.get("figures", {}).items()]
    for key, value in config.get("tables", {}).items():
        wanted += [(f"tables.{key}", v) for v in (value if isinstance(value, list) else [value])]
    return wanted


def run_params(config, arch, variant):
    """Everything from the config that determines one training run's weights (RunSpec fields
    but seed and vocabulary); as a rule's params, a change to any of them reruns the job."""
    train, var = config["train"], config["variants"][variant]
    runs = schedule(config, {"arch": arch, "variant": variant})
    keys = ("batch_size", "lr", "warmup", "min_lr_ratio", "weight_decay", "grad_clip", "eval_batches",
            "grad_accum", "dtype")
    return {"family": config["architectures"][arch]["family"], **model_dims(config, arch), "tied": var["tied"],
            "input_grad_scale": float(var.get("input_grad_scale", 1.0)),
            "checkpoints": list(runs.checkpoints), "steps": runs.steps, **{k: train[k] for k in keys}}


def typed_overrides(config, overrides):
    """Read the text values of `snakemake --config` overrides as YAML, in `config` (where Snakemake
    has merged them): it parses a nested `lens={steps: 30}` with every value a string ('30')."""
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(config.get(key), dict):
            typed_overrides(config[key], value)
        else:
            config[key] = _typed(value)


def _typed(value):
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_typed(v) for v in value]
    if not isinstance(value, str):
        return value
    try:
        parsed = yaml.safe_load(value)
    except yaml.YAMLError:
        return value
    return value if isinstance(parsed, (dict, list)) else parsed

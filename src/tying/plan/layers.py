"""The config a run uses, as layers: config.yaml, then each --configfile, then --config (docs/configuration.md,
"Overlays"), the `--config` text read as YAML and local models' paths made absolute. Unchecked: tying.plan.config's
`prepared` checks the result."""

import os
from pathlib import Path

import yaml

from tying.errors import PipelineError

CHECKOUT = Path(__file__).resolve().parents[3]  # the repository: its config.yaml, configs/ and workflow/

# A --configfile is an overlay holding only what it changes; with snakemake's --replace-workflow-config the
# files replace config.yaml instead (a whole config, as the tests' are).
WHOLE_SECTIONS = ("pairs", "figures", "tables")  # what to build: an overlay that gives one replaces it whole


def overlay(base, layer):
    """`layer` over `base`, as a new dict. `pairs`, `figures` and `tables` (what to build) are replaced whole
    by a layer that gives them. Any other section (top-level key) that both give as a mapping merges
    entry by entry, each entry replaced whole (`train: {steps: 100}` keeps the other train keys;
    `variants: {tied_x2: {...}}` adds a variant). Null removes a section or an entry; any other value
    replaces."""
    merged = {key: dict(value) if isinstance(value, dict) else value for key, value in base.items()}
    for key, value in (layer or {}).items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, dict) and isinstance(merged.get(key), dict) and key not in WHOLE_SECTIONS:
            for entry, sub in value.items():
                if sub is None:
                    merged[key].pop(entry, None)
                else:
                    merged[key][entry] = sub
        else:
            merged[key] = _without_nulls(value)
    return merged


def _without_nulls(value):
    return {k: v for k, v in value.items() if v is not None} if isinstance(value, dict) else value


def layered(default, configfiles=(), overrides=None, replace=False):
    """The config a run uses: `default` (config.yaml's path; skipped when `replace`), then each of
    `configfiles` in order, then the `--config` `overrides` (a mapping), each laid over the last with `overlay`;
    a file whose `extends` names another config file (relative to its own folder) has that one laid first.
    A file that is not a mapping raises PipelineError naming it."""
    config = {}
    for path in ([] if replace else [default]) + list(configfiles):
        for layer in _file_layers(path):
            config = overlay(config, layer)
    config = overlay(config, overrides or {})
    if "seeds" in (overrides or {}):
        _follow_seeds(config, _typed(overrides["seeds"]))
    return config


def _file_layers(path, seen=()):
    """The layers of one config file: those of the file its `extends` names, then its own (without `extends`)."""
    path = Path(path).resolve()
    if path in seen:
        raise PipelineError(f"{path}: extends itself through {' -> '.join(p.name for p in seen)}")
    layer = yaml.safe_load(open(path)) or {}
    if not isinstance(layer, dict):
        raise PipelineError(f"{path}: a config file is a mapping of sections, not {type(layer).__name__}")
    base = layer.pop("extends", None)
    return [*(_file_layers(path.parent / base, (*seen, path)) if base else []), layer]


def _follow_seeds(config, seeds):
    """`--config seeds=[...]` reaches the pairs with seeds of their own too: each keeps those of its own that
    are listed, or takes the listed ones when none of its own is (`seeds=[0]`: the control's [0, 1, 2] -> [0])."""
    if not isinstance(seeds, list):
        return
    for name, pair in list(config.get("pairs", {}).items()):
        if isinstance(pair, dict) and isinstance(pair.get("seeds"), list):
            config["pairs"][name] = {**pair, "seeds": [s for s in pair["seeds"] if s in seeds] or seeds}


def load(*configfiles, default=None):
    """`layered` over this checkout's config.yaml: what `snakemake --configfile F ...` runs, for scripts and
    tests (`load("configs/paper.yaml")`)."""
    return layered(default or CHECKOUT / "config.yaml", [CHECKOUT / f for f in configfiles])


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


def local_paths(config, base):
    """`config` with each local model's path ({path} and its tokenizer folder, a local pair's evolution
    directories, a pair's given lens folders) made absolute
    against `base` (where snakemake started: jobs read them from the run's workdir), in place; anything the
    schema will refuse is left as it is."""
    for pair in (config.get("pairs") or {}).values():
        if not isinstance(pair, dict):
            continue
        for role in ("tied", "untied"):
            ref = pair.get(role)
            if isinstance(ref, dict) and isinstance(ref.get("path"), str):
                ref["path"] = _absolute(ref["path"], base)
                if isinstance(ref.get("tokenizer"), str):
                    ref["tokenizer"] = _absolute(ref["tokenizer"], base)
        if isinstance(pair.get("lens"), dict):  # given lens folders
            pair["lens"] = {
                role: _absolute(path, base) if isinstance(path, str) else path for role, path in pair["lens"].items()
            }
        if (
            isinstance(pair.get("untied"), dict)
            and "path" in pair["untied"]
            and isinstance(pair.get("evolution"), dict)
        ):
            pair["evolution"] = {
                step: _absolute(path, base) if isinstance(path, str) else path
                for step, path in pair["evolution"].items()
            }
    return config


def _absolute(path, base):
    return os.path.normpath(os.path.join(base, os.path.expanduser(path)))

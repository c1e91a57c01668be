"""A repository's training-step branches, as the hub lists them, written into a config's `evolution`.

Branch names are read, never derived: OLMo's `step{N}-tokens{M}B` rounds M in ways no one formula
reproduces (OLMo-1B-0724 has step31000-tokens64B), Pythia's are `step{N}`.

    python -m tying.revisions allenai/OLMo-1B-0724-hf --steps 0 2000 4000
    python -m tying.revisions allenai/OLMo-1B-0724-hf --steps 0 2000 --config configs/paper.yaml --pair main

The first prints the `evolution` mapping; the second rewrites that pair's `evolution` in the config
in place (its other lines, comments included, stay as they are).
"""
import argparse
import json
import re
import sys
from pathlib import Path

import yaml
from huggingface_hub import HfApi, constants

from tying.errors import PipelineError
from tying.hub import hub_errors
from tying.io import atomic_path

STEP_BRANCH = re.compile(r"step(\d+)(?:-.*)?")


def step_branches(repo_id, steps=None):
    """{step: branch name} of the branches of `repo_id` named `step{N}` or `step{N}-...`, for the
    `steps` given (every one must have exactly one branch), or for every step when None."""
    found = {}
    with hub_errors(f"cannot list the branches of {repo_id}", constants.is_offline_mode()):
        refs = HfApi().list_repo_refs(repo_id)
    for branch in refs.branches:
        match = STEP_BRANCH.fullmatch(branch.name)
        if match:
            found.setdefault(int(match.group(1)), []).append(branch.name)
    wanted = sorted(found) if steps is None else sorted(set(steps))
    missing = [step for step in wanted if step not in found]
    if missing:
        raise PipelineError(f"{repo_id} has no branch for step {', '.join(map(str, missing))} ({len(found)} step "
                            f"branches, steps {min(found, default='-')} to {max(found, default='-')})")
    ambiguous = {step: found[step] for step in wanted if len(found[step]) > 1}
    if ambiguous:
        raise PipelineError(f"{repo_id}: more than one branch for a step: {ambiguous}")
    return {step: found[step][0] for step in wanted}


def evolution_block(branches, indent):
    """The YAML lines of an `evolution` mapping {step: branch}, each indented by `indent` spaces."""
    return "".join(f"\n{' ' * indent}{step}: {_scalar(name)}" for step, name in sorted(branches.items()))


def set_evolution(config_path, pair, branches):
    """Rewrite `pairs.<pair>.evolution` of the YAML config at `config_path` as `branches`, adding the
    key after the pair's `untied` entry when it has none; every other line is kept as it is."""
    text = Path(config_path).read_text()
    pairs = _mapping(yaml.compose(text), "the config").get("pairs", (None, None))[1]
    entries = _mapping(_mapping(pairs, "pairs").get(pair, (None, None))[1], f"pairs.{pair}")
    if "evolution" in entries:
        key, value = entries["evolution"]
        block = evolution_block(branches, key.start_mark.column + 2)
        text = text[:key.end_mark.index] + ":" + block + text[_end(value):]
    elif "untied" in entries:
        key, value = entries["untied"]
        line_end = text.find("\n", _end(value))
        line_end = len(text) if line_end < 0 else line_end
        text = text[:line_end] + f"\n{' ' * key.start_mark.column}evolution:" + evolution_block(
            branches, key.start_mark.column + 2) + text[line_end:]
    else:
        raise PipelineError(f"{config_path}: pairs.{pair} has no untied model to follow")
    if yaml.safe_load(text)["pairs"][pair]["evolution"] != branches:
        raise PipelineError(f"{config_path}: could not rewrite pairs.{pair}.evolution in place")
    with atomic_path(config_path) as tmp:
        tmp.write_text(text)


def _mapping(node, where):
    """{key: (key node, value node)} of a YAML mapping node."""
    if not isinstance(node, yaml.MappingNode):
        raise PipelineError(f"{where} is missing or not a mapping")
    return {key.value: (key, value) for key, value in node.value}


def _end(node):
    """Where the text of a YAML node ends (a block collection's own end mark lies at the next token)."""
    if isinstance(node, yaml.ScalarNode) or node.flow_style or not node.value:
        return node.end_mark.index
    last = node.value[-1]
    return _end(last[1] if isinstance(node, yaml.MappingNode) else last)


def _scalar(name):
    return name if yaml.safe_load(name) == name else json.dumps(name)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m tying.revisions", description=__doc__.split("\n\n")[0])
    parser.add_argument("repo_id")
    parser.add_argument("--steps", type=int, nargs="+", help="training steps (default: every step branch)")
    parser.add_argument("--config", help="a config to write the branches into, as pairs.PAIR.evolution")
    parser.add_argument("--pair", help="the pair whose evolution to rewrite (with --config)")
    args = parser.parse_args(argv)
    if bool(args.config) != bool(args.pair):
        parser.error("--config and --pair go together")
    try:
        branches = step_branches(args.repo_id, args.steps)
        if args.config:
            set_evolution(args.config, args.pair, branches)
    except PipelineError as error:
        sys.exit(f"error: {error}")
    print("evolution:" + evolution_block(branches, 2))


if __name__ == "__main__":
    main()

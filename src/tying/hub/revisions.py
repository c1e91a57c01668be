"""A repository's training-step branches, as the hub lists them, written into a config's `evolution`;
and a config's hub references pinned to the commits their branches point to.

Branch names are read, never derived: OLMo's `step{N}-tokens{M}B` rounds M in ways no one formula
reproduces (OLMo-1B-0724 has step31000-tokens64B), Pythia's are `step{N}`.

    python -m tying.hub.revisions allenai/OLMo-1B-0724-hf --steps 0 2000 4000
    python -m tying.hub.revisions allenai/OLMo-1B-0724-hf --steps 0 2000 --config configs/paper.yaml --pair main
    python -m tying.hub.revisions pin configs/paper.yaml [--pair main]

The first prints the `evolution` mapping; the second rewrites that pair's `evolution` in the config
in place (its other lines, comments included, stay as they are). The third rewrites, in place, every
hub reference of the config (each pair's tied and untied model, an `hf` corpus; with --pair, that
pair's) whose revision is a branch or tag, or absent (main), as the commit the hub says it points to,
noting the branch and the date in a comment on its line.
"""

import argparse
import datetime
import functools
import json
import re
import sys
from pathlib import Path

import yaml
from huggingface_hub import HfApi, constants

from tying.errors import PipelineError
from tying.hub.fetch import hub_errors
from tying.io import atomic_path
from tying.plan.pins import COMMIT, hub_references

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
        raise PipelineError(
            f"{repo_id} has no branch for step {', '.join(map(str, missing))} ({len(found)} step "
            f"branches, steps {min(found, default='-')} to {max(found, default='-')})"
        )
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
    _set_pair_key(config_path, pair, "evolution", branches, evolution_block)


def _set_pair_key(config_path, pair, name, value, block):
    """Rewrite `pairs.<pair>.<name>` of the YAML config at `config_path` as `value`, formatted by
    block(value, indent), adding the key after the pair's `untied` entry when it has none; every other
    line is kept as it is, and the result is read back to check it before it is written."""
    text = Path(config_path).read_text()
    pairs = _mapping(yaml.compose(text), "the config").get("pairs", (None, None))[1]
    entries = _mapping(_mapping(pairs, "pairs").get(pair, (None, None))[1], f"pairs.{pair}")
    if name in entries:
        key, node = entries[name]
        text = text[: key.end_mark.index] + ":" + block(value, key.start_mark.column + 2) + text[_end(node) :]
    elif "untied" in entries:
        key, node = entries["untied"]
        line_end = _line_end(text, _end(node))
        text = (
            text[:line_end]
            + f"\n{' ' * key.start_mark.column}{name}:"
            + block(value, key.start_mark.column + 2)
            + text[line_end:]
        )
    else:
        raise PipelineError(f"{config_path}: pairs.{pair} has no untied model to follow")
    if yaml.safe_load(text)["pairs"][pair][name] != value:
        raise PipelineError(f"{config_path}: could not rewrite pairs.{pair}.{name} in place")
    with atomic_path(config_path) as tmp:
        tmp.write_text(text)


def hub_commit(repo_id, repo_type, revision):
    """The commit `revision` of the hub repository points to now, asked of the hub (no cache fallback)."""
    api = HfApi()
    info = api.dataset_info if repo_type == "dataset" else api.model_info
    with hub_errors(f"cannot resolve {repo_id}@{revision}", constants.is_offline_mode()):
        return info(repo_id, revision=revision).sha


def pin_config(config_path, pair=None):
    """Rewrite every unpinned hub reference of the YAML config at `config_path` (only `pair`'s with a
    pair) as the commit its revision points to, in place, each line's comment kept and noting the branch;
    returns [(where, repo, branch, commit)]. Run again, it finds nothing to pin."""
    text = Path(config_path).read_text()
    config = yaml.safe_load(text)
    if pair is not None and pair not in config.get("pairs", {}):
        raise PipelineError(f"{config_path}: no pair {pair!r}")
    resolve = functools.cache(hub_commit)  # a model several pairs share is asked for once
    pins = [
        (where, repo, rev, resolve(repo, kind, rev))
        for where, repo, kind, rev in hub_references(config)
        if not COMMIT.fullmatch(rev) and (pair is None or where.startswith(f"pairs.{pair}."))
    ]
    note = f"pinned from {{}} on {datetime.date.today().isoformat()}"
    for where, _, branch, commit in pins:
        text = _set_revision(text, where.split("."), commit, note.format(branch))
    pinned = {where: rev for where, _, _, rev in hub_references(yaml.safe_load(text))}
    if any(pinned[where] != commit for where, _, _, commit in pins):
        raise PipelineError(f"{config_path}: could not rewrite its revisions in place")
    if pins:
        with atomic_path(config_path) as tmp:
            tmp.write_text(text)
    return pins


def _set_revision(text, keys, commit, note):
    """`text` with the revision of the mapping at `keys` set to `commit` (the key added when absent) and
    `note` ending the comment of the line it is on."""
    node = yaml.compose(text)
    for key in keys:
        node = _mapping(node, ".".join(keys))[key][1]
    entries = _mapping(node, ".".join(keys))
    if "revision" in entries:
        value = entries["revision"][1]
        at, end, new = value.start_mark.index, value.end_mark.index, commit
    elif node.flow_style:  # {hub: ...}: before the closing brace
        at = end = len(text[: node.end_mark.index - 1].rstrip())
        new = f", revision: {commit}"
    else:  # a block mapping: a line of its own after its last entry
        at = end = _line_end(text, _end(node))
        new = f"\n{' ' * node.value[0][0].start_mark.column}revision: {commit}"
    text = text[:at] + new + text[end:]
    line_end = _line_end(text, at + len(new))
    return text[:line_end] + ("; " if "#" in text[at:line_end] else "  # ") + note + text[line_end:]


def _line_end(text, index):
    end = text.find("\n", index)
    return len(text) if end < 0 else end


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


def pin_main(argv):
    """`pin CONFIG [--pair NAME]`: pin the config's references in place and print each pin."""
    parser = argparse.ArgumentParser(prog="python -m tying.hub.revisions pin", description=pin_config.__doc__)
    parser.add_argument("config")
    parser.add_argument("--pair", help="pin only this pair's tied and untied models")
    args = parser.parse_args(argv)
    try:
        pins = pin_config(args.config, args.pair)
    except PipelineError as error:
        sys.exit(f"error: {error}")
    for where, repo, branch, commit in pins:
        print(f"{where}: {repo}@{branch} -> {commit}")
    print(f"{args.config}: {len(pins)} reference(s) pinned")


# --- Matched checkpoints of a released tied/untied pair (claims over training) -------------------------------
TOKENS_BRANCH = re.compile(r"step(\d+)-tokens(\d+)B")


def branch_names(repo_id):
    """Every branch name of `repo_id`, as the hub lists them."""
    with hub_errors(f"cannot list the branches of {repo_id}", constants.is_offline_mode()):
        return [branch.name for branch in HfApi().list_repo_refs(repo_id).branches]


def token_grid(first=4, last=3000, points=10):
    """`points` token counts (billions) log-spaced from `first` to `last`, rounded to whole billions."""
    return sorted({round(first * (last / first) ** (i / (points - 1))) for i in range(points)})


def match_branches(tied_names, untied_names, grid):
    """[{tokens_b, tied, tied_tokens_b, untied, untied_tokens_b}]: for each grid point (billions of tokens),
    each repository's `step{N}-tokens{M}B` branch whose M is closest (a tie: the lower step); a point that
    matches the same two branches as the point before it is left out."""
    tied, untied = _token_branches(tied_names, "tied"), _token_branches(untied_names, "untied")
    points = []
    for tokens in grid:
        (t_tokens, _, t_name), (u_tokens, _, u_name) = (
            min(found, key=lambda branch: (abs(branch[0] - tokens), branch[1])) for found in (tied, untied)
        )
        if not points or (points[-1]["tied"], points[-1]["untied"]) != (t_name, u_name):
            points.append(
                {
                    "tokens_b": tokens,
                    "tied": t_name,
                    "tied_tokens_b": t_tokens,
                    "untied": u_name,
                    "untied_tokens_b": u_tokens,
                }
            )
    return points


def trajectory_block(points, indent):
    """The YAML lines of a `trajectory` list, one flow mapping per point, each indented by `indent` spaces."""

    def entry(value):
        return _scalar(value) if isinstance(value, str) else value

    return "".join(
        f"\n{' ' * indent}- {{" + ", ".join(f"{k}: {entry(v)}" for k, v in point.items()) + "}" for point in points
    )


def set_trajectory(config_path, pair, points):
    """Rewrite `pairs.<pair>.trajectory` of the YAML config at `config_path` as `points`, adding the key
    after the pair's `untied` entry when it has none; every other line is kept as it is."""
    _set_pair_key(config_path, pair, "trajectory", points, trajectory_block)


def _token_branches(names, role):
    """[(tokens in billions, step, name)] of the `step{N}-tokens{M}B` names among `names`."""
    found = [(int(m[2]), int(m[1]), name) for name in names if (m := TOKENS_BRANCH.fullmatch(name))]
    if not found:
        raise PipelineError(f"the {role} repository has no step{{N}}-tokens{{M}}B branch among its {len(names)}")
    return found


def match_main(argv):
    """`match TIED UNTIED [--first B --last B --points N] [--config C --pair P]`: print (and write) the
    matched branches of a released pair."""
    parser = argparse.ArgumentParser(prog="python -m tying.hub.revisions match", description=match_branches.__doc__)
    parser.add_argument("tied_repo")
    parser.add_argument("untied_repo")
    parser.add_argument("--first", type=float, default=4, help="first grid point, billions of tokens (default 4)")
    parser.add_argument("--last", type=float, default=3000, help="last grid point, billions of tokens (default 3000)")
    parser.add_argument("--points", type=int, default=10, help="log-spaced grid points (default 10)")
    parser.add_argument("--config", help="a config to write the points into, as pairs.PAIR.trajectory")
    parser.add_argument("--pair", help="the pair whose trajectory to rewrite (with --config)")
    args = parser.parse_args(argv)
    if bool(args.config) != bool(args.pair):
        parser.error("--config and --pair go together")
    try:
        points = match_branches(
            branch_names(args.tied_repo), branch_names(args.untied_repo), token_grid(args.first, args.last, args.points)
        )
        if args.config:
            set_trajectory(args.config, args.pair, points)
    except PipelineError as error:
        sys.exit(f"error: {error}")
    print("trajectory:" + trajectory_block(points, 2))


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["pin"]:
        return pin_main(argv[1:])
    if argv[:1] == ["match"]:
        return match_main(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m tying.hub.revisions", description=__doc__.split("\n\n")[0])
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

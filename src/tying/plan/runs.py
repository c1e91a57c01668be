"""A trained run of an architecture, from the config: its dimensions, its schedule (the steps it trains and
exports: `schedule`, the one place that reads train.steps and train.checkpoints and an architecture's own
`train` override of them) and the batches it draws."""

from dataclasses import dataclass


def model_dims(config, arch):
    """model.* with the architecture's overrides applied (family and its train schedule removed); the
    schema leaves model.* without defaults, since an architecture's defaults would override model.*."""
    overrides = {k: v for k, v in config["architectures"][arch].items() if k not in ("family", "train")}
    return {"intermediate_size": None, "init": "auto", "clip_qkv": "auto", **config["model"], **overrides}


@dataclass(frozen=True)
class Schedule:
    """A trained run's schedule: optimizer `steps`, exported `checkpoints` (ascending)."""

    steps: int
    checkpoints: tuple

    @property
    def final(self):
        """The last exported step: where a pair is compared unless it names its own step."""
        return self.checkpoints[-1]


def schedule(config, arch=None):
    """The training schedule of architecture `arch`'s runs: train.steps and train.checkpoints, each replaced by
    its architecture's `train` entry where it has one (a scaling cell's schedule); `arch` None asks for the
    shared train.* schedule."""
    train = config["train"]
    if arch is not None:
        train = {**train, **config["architectures"][arch].get("train", {})}
    return Schedule(train["steps"], tuple(sorted(train["checkpoints"])))


def checkpoint_groups(config):
    """{checkpoints: [architectures]}: the architectures whose runs export the same steps, the shared
    train.checkpoints first (each group is one train rule, whose outputs are those checkpoints)."""
    groups = {schedule(config).checkpoints: []}
    for arch in config["architectures"]:
        groups.setdefault(schedule(config, arch).checkpoints, []).append(arch)
    return groups


def run_shape(config, arch, seed, steps):
    """(seed, steps, batch_size, seq_len): the batches a run of `arch` drew by step `steps`, which key its drawn
    counts and count baselines."""
    return int(seed), int(steps), config["train"]["batch_size"], model_dims(config, arch)["seq_len"]


def token_plan(config):
    """The token join's line in a dry run: how many shards, and how many tokens each training run
    draws (steps x batch x sequence; its architecture's steps) beside the corpus's budget."""
    batch, corpus = config["train"]["batch_size"], config["corpus"]
    steps = sorted({schedule(config, arch).steps for arch in config["architectures"]})
    seq_len = max(model_dims(config, arch)["seq_len"] for arch in config["architectures"])
    budget = f"; the corpus streams up to {corpus['max_tokens']:,} words" if "max_tokens" in corpus else ""
    tokens = " to ".join(f"{s * batch * seq_len:,}" for s in sorted({steps[0], steps[-1]}))
    return (
        f"join {corpus['shards']} token shard(s): each training run draws {' or '.join(map(str, steps))} x "
        f"{batch} x {seq_len} = {tokens} tokens{budget} (the job prints the train split's tokens)"
    )

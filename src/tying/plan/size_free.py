"""A training regime in the numbers that do not depend on model size, computed from a config.

Adam moves each coordinate by about lr a step, and the authors' initialisation starts every embedding row at a
norm near 1 (std 1/sqrt(d)), so a regime's effect on a row reads in:
- relative update size lr x sqrt(d): one step's move against a row;
- update budget lr x sqrt(d x steps): how far a row can random-walk over the run before decay balances it;
- total decay wd x the sum of the run's learning rates, and its no-gradient level (tying.plan.decay);
- warmup fraction: warmup / steps;
- tokens a step, and the share of steps whose batch looks up a token of mean frequency, 1 - (1 - 1/V)^tokens;
- tokens per parameter: tokens read over the run / the tied model's parameters;
- passes over the corpus: tokens read / the corpus's training tokens (a build's count: tokens.train of
  results/tokens/meta.json).
The paper's regime is configs/paper-train.yaml's (the authors' 10k-step 1B config): a cell matching all of these
at d = 96 (configs/paper-regime.yaml) tells which differences from the paper are the regime's.

    .venv/bin/python -m tying.plan.size_free [--builds DIR] config.yaml configs/depth.yaml:d96_l12_s2500 ...
"""

import argparse
import json
import math
import sys
from pathlib import Path

from tying.errors import PipelineError
from tying.plan.claims import claims_pairs
from tying.plan.config import prepared
from tying.plan.decay import no_gradient_level, total_decay
from tying.plan.grid import olmo_params
from tying.plan.pairs import pair_refs
from tying.plan.run_params import run_params
from tying.plan.run_spec import RunSpec

COLUMNS = {  # key: the table's header
    "config": "config",
    "pair": "pair",
    "hidden_size": "d",
    "lr": "lr",
    "steps": "steps",
    "relative_update": "lr x sqrt(d)",
    "update_budget": "lr x sqrt(d x steps)",
    "total_decay": "total decay",
    "no_gradient_level": "no-gradient level",
    "warmup_fraction": "warmup fraction",
    "tokens_per_step": "tokens a step",
    "lookup_share": "mean token's lookup share",
    "tokens_per_param": "tokens per parameter",
    "corpus_tokens": "corpus training tokens",
    "passes": "passes over the corpus",
}


def size_free(config, pair=None, corpus_tokens=None):
    """The size-free numbers (COLUMNS' keys but config) of the tied run of `pair` (default: the first claims pair,
    or the first pair) in a checked `config` (tying.plan.config.prepared); `corpus_tokens`: the corpus's training
    tokens, for the passes (None: not known)."""
    pairs = config.get("pairs") or {}
    pair = pair or (claims_pairs(config) or list(pairs) or [None])[0]
    tied = pair_refs(config, pair).get("tied") if pair in pairs else None
    if tied is None or not tied.trained:
        raise PipelineError(f"size-free numbers: {pair!r} is not a trained pair of the config")
    run = run_params(config, tied.arch, tied.variant)
    if run["family"] != "olmo":
        raise PipelineError(
            f"size-free numbers: pair {pair!r} is {run['family']}; parameters are counted for OLMo only"
        )
    vocab = config["tokenizer"]["vocab_size"]
    spec = RunSpec.from_dict(
        {**run, "seq_len": config["model"]["seq_len"], "seed": 0, "vocab_size": vocab, "eos_id": 0}
    )
    d, steps = spec.hidden_size, spec.steps
    per_step = spec.batch_size * spec.seq_len
    params = sum(olmo_params(d, spec.layers, spec.intermediate_size or 4 * d, vocab, tied=True))
    read = steps * per_step
    return {
        "pair": pair,
        "hidden_size": d,
        "lr": spec.lr,
        "steps": steps,
        "relative_update": spec.lr * math.sqrt(d),
        "update_budget": spec.lr * math.sqrt(d * steps),
        "total_decay": total_decay(spec),
        "no_gradient_level": no_gradient_level(spec),
        "warmup_fraction": spec.warmup / steps,
        "tokens_per_step": per_step,
        "lookup_share": 1 - (1 - 1 / vocab) ** per_step,
        "tokens_per_param": read / params,
        "corpus_tokens": corpus_tokens,
        "passes": None if corpus_tokens is None else read / corpus_tokens,
    }


def built_corpus_tokens(config, launch_dir="."):
    """The corpus's training tokens as the config's build counted them (its workdir's results/tokens/meta.json,
    relative to `launch_dir`), None where it has not been built."""
    meta = Path(launch_dir) / config.get("workdir", ".") / "results" / "tokens" / "meta.json"
    return json.loads(meta.read_text())["tokens"]["train"] if meta.is_file() else None


def regime_rows(regimes, launch_dir=".", builds=None):
    """One row (size_free, with `config`) per regime, a config file (relative to `launch_dir`) laid over config.yaml
    as a build reads it (config.yaml: the default alone), optionally with the pair to read after a colon
    (configs/depth.yaml:d96_l12_s2500); the passes from the builds under `builds` (default: `launch_dir`)."""
    rows = []
    for regime in regimes:
        path, _, pair = regime.partition(":")
        config = prepared(*([] if Path(path).name == "config.yaml" else [path]), launch_dir=launch_dir).config
        tokens = built_corpus_tokens(config, launch_dir if builds is None else builds)
        rows.append({"config": regime, **size_free(config, pair or None, tokens)})
    return rows


def formatted(key, value):
    """A table cell: counts with separators, ratios to 3 significant figures, unknown as 'not built'."""
    if value is None:
        return "not built"
    if isinstance(value, str):
        return value
    if key in ("hidden_size", "steps", "tokens_per_step", "corpus_tokens"):
        return f"{value:,}"
    return f"{value:.3g}"


def markdown(rows):
    """The rows as a Markdown table, COLUMNS in order."""
    lines = ["| " + " | ".join(COLUMNS.values()) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(formatted(k, row[k]) for k in COLUMNS) + " |" for row in rows]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("regimes", nargs="*", default=["config.yaml"], help="config files, each with :PAIR if needed")
    parser.add_argument("--builds", type=Path, help="a folder holding the configs' builds (default: here)")
    args = parser.parse_args()
    try:
        sys.stdout.write(markdown(regime_rows(args.regimes, builds=args.builds)))
    except (PipelineError, OSError) as err:
        sys.exit(f"error: {err}")

"""Which lens budget and start reach the converged held-out KL? Every state, and C3, against a 4x reference.

For each checkpoint (a trained run of a build) trains a reference lens at `--reference-steps` (default
4x the config's lens.steps, the config's recipe) and a lens for each parametrisation (`--coordinates`:
plain, tuned-lens's translators; whitened, the same trained in whitened coordinates, lens.whiten; fisher,
whitened on the output side too, lens.fisher) and budget (`--budgets`), all with the same seed (the same
windows in the same order), and scores every lens on all the build's validation windows. Prints per state the
held-out KL of each lens, its change from the reference, the largest, and the CPU seconds of training and
scoring it; with a tied and an untied run of one seed, also C3 (tied minus untied mean KL over the early states)
of each and its change from the reference's.
The lens job's tolerance is 0.005 bits on every state (docs/statistics.md, C3).
Usage: .venv/bin/python benchmarks/studies/lens_recipes.py BUILD [--runs olmo/tied/seed0 olmo/untied/seed0]
[--budgets 200 400 800] [--coordinates plain whitened fisher] [--reference-steps N] [--threads 1] [--record [NOTE]]
BUILD: a directory where the default build (or its lens targets) ran, holding results/checkpoints
and results/tokens; the recipe defaults to this checkout's config.yaml `lens:` section.
"""

import argparse
import sys
import time
from pathlib import Path

import pandas as pd
import yaml

from tying.data.tokens import load_ids
from tying.lens.fitting import recipe, train_lens
from tying.lens.scoring import early_states, evaluate_lens
from tying.runtime import configure
from tying.train.models import frozen_model

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))  # records.py and train_bench's GEMM peak

import records  # noqa: E402
from train_bench import gemm_peak  # noqa: E402

TOLERANCE = 0.005
COORDINATES = {
    "plain": {"whiten": False, "fisher": False},
    "whitened": {"whiten": True, "fisher": False},
    "fisher": {"whiten": True, "fisher": True},
}


def timed_lens(model, train, val, cfg, steps, coordinates=None):
    """Train and score one lens (the config's recipe, or in `coordinates`): (tuned KL by state, CPU s)."""
    cpu = time.process_time()
    lens = train_lens(model, train, **{**recipe(cfg), "steps": steps, **COORDINATES.get(coordinates, {})}, seed=0)
    frame = evaluate_lens(model, lens, val, seq_len=cfg["seq_len"], batch_size=cfg["batch_size"])
    return frame[frame["lens"] == "tuned"].set_index("layer")["kl_bits"], time.process_time() - cpu


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("build", type=Path)
    parser.add_argument(
        "--runs",
        nargs="+",
        default=["olmo/tied/seed0", "olmo/untied/seed0"],
        help="arch/variant/seed of trained runs, read at the build's last training step",
    )
    parser.add_argument("--budgets", nargs="+", type=int)
    parser.add_argument("--coordinates", nargs="+", choices=list(COORDINATES), default=list(COORDINATES))
    parser.add_argument("--reference-steps", type=int)
    parser.add_argument("--threads", type=int, default=1, help="the lens rule's default")
    records.add_flag(parser)
    args = parser.parse_args()
    configure(args.threads)
    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())["lens"]
    build = yaml.safe_load((args.build / "config.yaml").read_text())
    reference_steps = args.reference_steps or 4 * cfg["steps"]
    budgets = args.budgets or [cfg["steps"] // 2, cfg["steps"], 2 * cfg["steps"]]
    tokens = args.build / "results" / "tokens"
    train, val = (load_ids(tokens / f"{split}.json", tokens / "meta.json") for split in ("train", "val"))
    print(
        f"lens recipe: {recipe(cfg)}; reference {reference_steps} steps of it; "
        f"{len(val) // cfg['seq_len']} validation windows; tolerance {TOLERANCE} bits"
    )
    early, kl, recorded = None, {}, []
    for run in args.runs:
        model = frozen_model(args.build / "results" / "checkpoints" / run / f"step{build['train']['steps']}")
        early = early_states(model.config.num_hidden_layers)
        reference, ref_s = timed_lens(model, train, val, cfg, reference_steps)
        table, costs = {"reference": reference}, {"reference": ref_s}
        for name in args.coordinates:
            for steps in budgets:
                table[f"{name} {steps}"], costs[f"{name} {steps}"] = timed_lens(model, train, val, cfg, steps, name)
        table = pd.DataFrame(table)
        kl[run] = table
        change = table.drop(columns="reference").sub(table["reference"], axis=0)
        print(f"\n{run}: held-out KL (bits) by state, and change from the reference")
        print(pd.concat({"kl": table, "change": change}, axis=1).round(4).to_string())
        worst = change.abs().max()
        print("max |change|: " + ", ".join(f"{k} {v:.4f}{' ok' if v <= TOLERANCE else ''}" for k, v in worst.items()))
        print("CPU s (train + score): " + ", ".join(f"{k} {v:.1f}" for k, v in costs.items()))
        named = table.rename(columns={"reference": f"reference {reference_steps}"})
        recorded.append(
            (
                run,
                [
                    (f"KL state {state}, {lens}", round(value, 4), "bits")
                    for lens in named
                    for state, value in named[lens].items()
                ],
            )
        )
    tied = [r for r in args.runs if "/tied/" in r]
    untied = [r for r in args.runs if "/untied/" in r]
    if tied and untied:
        c3 = kl[tied[0]].loc[early].mean() - kl[untied[0]].loc[early].mean()
        print(
            f"\nC3 ({tied[0]} minus {untied[0]}, early states {early}): "
            + ", ".join(f"{k} {v:+.4f}" for k, v in c3.items())
        )
        print(
            "C3 change from the reference: "
            + ", ".join(f"{k} {v - c3['reference']:+.4f}" for k, v in c3.items() if k != "reference")
        )
        recorded.append(
            (
                f"C3, {tied[0]} minus {untied[0]}",
                [
                    (f"C3, {k if k != 'reference' else f'reference {reference_steps}'}", round(v, 4), "bits")
                    for k, v in c3.items()
                ],
            )
        )
    if args.record is not None:
        peak = gemm_peak(1)[1]
        for setting, figures in recorded:
            records.append(figures, peak=peak, setting=setting, note=args.record)


if __name__ == "__main__":
    pd.set_option("display.width", 160)
    main()

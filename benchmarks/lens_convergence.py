"""Has the default lens budget converged? Per state, held-out tuned-lens KL at budget B and 2B, on a build's models.

For each checkpoint (a trained run of a build), trains the config's lens at `steps` B and at 2B
(same seed, so the same first windows) and evaluates both on the same held-out windows, as the
lens job does with B/2 and B. Prints KL by state at both budgets, the change, its maximum, and
the seconds (wall and CPU) of one lens job's work: a lens at B/2 and one at B, each evaluated.
Usage: .venv/bin/python benchmarks/lens_convergence.py BUILD [--runs olmo/tied/seed0 ...]
[--steps B] [--batch-size N] [--optimizer sgd|adam] [--lr LR] [--grad-clip C | --no-clip] [--threads 1]
BUILD: a directory where the default build (or its lens targets) ran, holding results/checkpoints
and results/tokens; recipe and budget default to BUILD/config.yaml's `lens:` section.
"""
import argparse
import time
from pathlib import Path

import pandas as pd
import torch
import yaml

from tying.lens import convergence, evaluate_lens, recipe, train_lens
from tying.runtime import keep_freed_memory
from tying.tokens import load_ids
from tying.unembed import frozen_model


def timed_lens(model, train, val, cfg, steps):
    """Train and evaluate one lens: (evaluate_lens frame, wall s, CPU s)."""
    wall, cpu = time.perf_counter(), time.process_time()
    lens = train_lens(model, train, **{**recipe(cfg), "steps": steps})
    frame = evaluate_lens(model, lens, val, seq_len=cfg["seq_len"], batch_size=cfg["batch_size"],
                          batches=cfg["eval_batches"])
    return frame, time.perf_counter() - wall, time.process_time() - cpu


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("build", type=Path)
    parser.add_argument("--runs", nargs="+", default=["olmo/tied/seed0", "olmo/untied/seed0"],
                        help="arch/variant/seed of trained runs, read at the config's last training step")
    parser.add_argument("--steps", type=int)
    parser.add_argument("--batch-size", type=int)
    parser.add_argument("--optimizer", choices=["sgd", "adam"])
    parser.add_argument("--lr", type=float)
    parser.add_argument("--grad-clip", type=float)
    parser.add_argument("--no-clip", action="store_true", help="no gradient clipping (the recipe before tuned-lens's)")
    parser.add_argument("--threads", type=int, default=1, help="the lens rule's default")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    keep_freed_memory()
    config = yaml.safe_load((args.build / "config.yaml").read_text())
    overrides = {"steps": args.steps, "batch_size": args.batch_size, "optimizer": args.optimizer, "lr": args.lr,
                 "grad_clip": args.grad_clip}
    cfg = {**config["lens"], **{k: v for k, v in overrides.items() if v is not None}}
    if args.no_clip:
        cfg["grad_clip"] = None
    tokens = args.build / "results" / "tokens"
    train, val = (load_ids(tokens / f"{split}.json", tokens / "meta.json") for split in ("train", "val"))
    budget = cfg["steps"]
    print(f"lens recipe: {recipe(cfg)}; B = {budget}, 2B = {2 * budget} steps")
    for run in args.runs:
        model = frozen_model(args.build / "results" / "checkpoints" / run / f"step{config['train']['steps']}")
        (half, *half_s), (full, *full_s), (double, _, _) = (timed_lens(model, train, val, cfg, steps)
                                                             for steps in (budget // 2, budget, 2 * budget))
        check = convergence(full, double).set_index("layer")
        check["logit_bits"] = full[full["lens"] == "logit"].set_index("layer")["kl_bits"]
        table = check.rename(columns={"kl_half_bits": "kl_B", "kl_bits": "kl_2B", "change_bits": "change"})
        print(f"\n{run}: held-out KL (bits) by state")
        print(table[["logit_bits", "kl_B", "kl_2B", "change"]].round(4).to_string())
        job_change = convergence(half, full)["change_bits"].abs().max()
        print(f"max |change| B -> 2B: {check['change_bits'].abs().max():.4f} bits; "
              f"the job's own check B/2 -> B: {job_change:.4f} bits")
        print(f"one lens job's lens work (B/2 and B, each evaluated): {half_s[0] + full_s[0]:.1f} s wall / "
              f"{half_s[1] + full_s[1]:.1f} s CPU")


if __name__ == "__main__":
    pd.set_option("display.width", 120)
    main()

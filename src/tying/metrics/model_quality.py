"""Model quality: how far a pair's trained models predict held-out text beyond count tables.

A run's validation loss (its training log, at each exported step) beside the unigram and bigram
baselines of the tokens it had drawn by then, on the same validation targets (tying.metrics.baselines). The
margin is the loss minus the bigram's: negative once the model predicts better than a bigram table.
The claims table's row LM takes, per seed, the largest margin over the pair's models (the worst of
them), so its interval lies below zero only when every model of every seed beats its table.
"""

import numpy as np
import pandas as pd

from tying.frames import at_step

COLUMNS = ["role", "arch", "variant", "step", "val_loss", "unigram_loss", "bigram_loss", "bigram_weight", "margin"]
LOSS_COLUMNS = ["step", "val_loss", "perplexity", "bigram_loss", "margin", "unigram_loss"]


def run_losses(log, baseline):
    """One run's validation loss at each step its training log evaluated, beside the count baselines of its
    drawn tokens where the baselines file has that step (else NaN): columns step, val_loss, unigram_loss,
    bigram_loss, bigram_weight, margin."""
    losses = pd.read_parquet(log, columns=["step", "val_loss"]).dropna()
    counts = pd.read_parquet(baseline, columns=["step", "unigram_loss", "bigram_loss", "bigram_weight"])
    rows = losses.merge(counts, on="step", how="left", validate="one_to_one")
    return rows.assign(margin=rows["val_loss"] - rows["bigram_loss"])


def quality_frame(runs, logs, baselines):
    """Tidy quality rows of one pair and seed.

    runs: (role, arch, variant) of each of the pair's trained models; logs, baselines: their training logs
    and count-baseline files (tying.metrics.baselines) in the same order. Returns COLUMNS, one row per model and
    step both hold.
    """
    frames = [
        run_losses(log, baseline).dropna(subset=["bigram_loss"]).assign(role=role, arch=arch, variant=variant)
        for (role, arch, variant), log, baseline in zip(runs, logs, baselines)
    ]
    return pd.concat(frames, ignore_index=True)[COLUMNS]


def loss_frame(runs, logs, baselines):
    """Table 7's held-out loss: a tidy frame (arch, variant, seed, step, val_loss, perplexity, and run_losses's
    baselines and margin) of `runs` [(arch, variant, seed)] from their training logs and count baselines."""
    frames = [
        run_losses(log, baseline).assign(arch=arch, variant=variant, seed=seed)
        for (arch, variant, seed), log, baseline in zip(runs, logs, baselines)
    ]
    rows = pd.concat(frames, ignore_index=True)
    return rows.assign(perplexity=np.exp(rows["val_loss"]))[["arch", "variant", "seed", *LOSS_COLUMNS]]


def worst_margin(quality, step=None):
    """Per seed, the largest margin over the pair's models at `step` (None: the last) -> Series by seed."""
    return at_step(quality, step).groupby("seed")["margin"].max()


def quality_detail(quality, step=None):
    """What the row's number leaves out: each model's mean margin and the two tables' losses (nats)."""
    rows = at_step(quality, step)
    margins = rows.groupby("role", sort=False)["margin"].mean()
    return (
        ", ".join(f"{role} {value:+.3f}" for role, value in margins.items())
        + f" nats; bigram {rows['bigram_loss'].mean():.3f}, unigram {rows['unigram_loss'].mean():.3f}"
    )

"""Intervals for means: Student-t over seeds, a bootstrap over tokens for one pair of models.

Seeds are few (3-5), so their mean gets the Student-t interval mean ± t(0.975, n-1) s/sqrt(n);
a percentile bootstrap over three values is just [min, max] and covers the mean about 74% of
the time. One released pair of models has no seeds: its per-token values get a percentile
bootstrap of their mean, which says how precisely that pair's mean is known, not whether the
effect generalises.
"""

import math

import numpy as np
import pandas as pd
from scipy import stats as scipy_stats

from tying.errors import PipelineError

LEVEL = 0.95
N_RESAMPLES = 2_000
RNG_SEED = 0  # fixed: the same inputs always give the same bootstrap interval


def mean_ci(values, level=LEVEL):
    """Mean of per-seed values and its Student-t interval (df = n - 1).

    Returns (mean, low, high). NaN values are dropped; one value gives (value, nan, nan);
    no value gives three NaNs.
    """
    x = np.asarray(values, dtype=float)
    x = x[~np.isnan(x)]
    if x.size == 0:
        return math.nan, math.nan, math.nan
    mean = float(x.mean())
    if x.size == 1:
        return mean, math.nan, math.nan
    half = float(scipy_stats.t.ppf((1 + level) / 2, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size))
    return mean, mean - half, mean + half


def token_bootstrap_ci(values, level=LEVEL, n_resamples=N_RESAMPLES, rng_seed=RNG_SEED):
    """Mean of per-token values (n,) and the percentile-bootstrap interval of that mean over tokens.

    Returns (mean, low, high); fewer than two values give no interval (NaNs).
    """
    x = np.asarray(values, dtype=float)
    x = x[~np.isnan(x)]
    if x.size < 2:
        return (float(x.mean()) if x.size else math.nan), math.nan, math.nan
    rng = np.random.default_rng(rng_seed)
    means = np.empty(n_resamples)
    for start in range(0, n_resamples, 100):  # 100 resamples at a time keeps memory at 100 n
        stop = min(start + 100, n_resamples)
        means[start:stop] = x[rng.integers(0, x.size, size=(stop - start, x.size))].mean(axis=1)
    tail = (1 - level) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return float(x.mean()), float(low), float(high)


def summarise(frame, by, value):
    """Mean and Student-t interval over seeds of `value`, one row per `by` group.

    `frame` holds one row per (group, seed). Returns columns by..., mean, ci_low, ci_high, n_seeds,
    interval (how the interval was computed).
    """
    by = list(by)
    rows = []
    for key, group in frame.groupby(by, sort=False):
        if group["seed"].duplicated().any():
            raise PipelineError(f"more than one {value} per seed in group {dict(zip(by, key))}")
        n = int(group[value].notna().sum())
        rows.append((*key, *mean_ci(group[value]), n, f"Student-t 95%, {n} seeds" if n > 1 else "none (one seed)"))
    return pd.DataFrame(rows, columns=[*by, "mean", "ci_low", "ci_high", "n_seeds", "interval"])


def summarise_tokens(frame, by, value):
    """Mean and bootstrap-over-tokens interval of `value`, one row per `by` group, for one pair of
    released models (no seeds): how precisely that pair's mean is known, not whether it generalises.

    `frame` holds one row per (group, token). Returns the columns of summarise.
    """
    rows = []
    for key, group in frame.groupby(list(by), sort=False):
        n = int(group[value].notna().sum())
        rows.append(
            (*key, *token_bootstrap_ci(group[value]), 1, f"bootstrap 95% over {n:,} tokens, one pair of models")
        )
    return pd.DataFrame(rows, columns=[*by, "mean", "ci_low", "ci_high", "n_seeds", "interval"])


def format_cell(mean, low, high, digits=3):
    """'mean [low, high]'; the mean alone when there is no interval; 'n/a' without a mean."""
    if math.isnan(mean):
        return "n/a"
    if math.isnan(low) or math.isnan(high):
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"

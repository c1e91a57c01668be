"""Mean over seeds with a 95% percentile-bootstrap confidence interval."""
import math

import numpy as np
import pandas as pd

from tying.errors import PipelineError

N_RESAMPLES = 10_000
LEVEL = 0.95
RNG_SEED = 0  # fixed: the same inputs always give the same interval


def mean_ci(values, n_resamples=N_RESAMPLES, level=LEVEL, rng_seed=RNG_SEED):
    """Mean of per-seed values (n,) and the percentile-bootstrap CI of that mean.

    Returns (mean, low, high). NaN values are dropped; one value gives
    (value, nan, nan); no value gives three NaNs.
    """
    x = np.asarray(values, dtype=float)
    x = x[~np.isnan(x)]
    if x.size == 0:
        return math.nan, math.nan, math.nan
    mean = float(x.mean())
    if x.size == 1:
        return mean, math.nan, math.nan
    rng = np.random.default_rng(rng_seed)
    boot = x[rng.integers(0, x.size, size=(n_resamples, x.size))].mean(axis=1)
    tail = (1 - level) / 2
    low, high = np.quantile(boot, [tail, 1 - tail])
    return mean, float(low), float(high)


def summarise(frame, by, value):
    """Mean and CI over seeds of `value`, one row per `by` group.

    `frame` holds one row per (group, seed). Returns columns
    by..., mean, ci_low, ci_high, n_seeds.
    """
    by = list(by)
    rows = []
    for key, group in frame.groupby(by, sort=False):
        if group["seed"].duplicated().any():
            raise PipelineError(f"more than one {value} per seed in group {dict(zip(by, key))}")
        rows.append((*key, *mean_ci(group[value]), int(group[value].notna().sum())))
    return pd.DataFrame(rows, columns=[*by, "mean", "ci_low", "ci_high", "n_seeds"])


def format_cell(mean, low, high, digits=3):
    """'mean ± half-width' of the CI; the mean alone when the CI is NaN; 'n/a' without a mean."""
    if math.isnan(mean):
        return "n/a"
    if math.isnan(low) or math.isnan(high):
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ± {(high - low) / 2:.{digits}f}"

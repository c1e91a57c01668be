"""Row norm of each token's embedding against how often the run drew it (Figure 5, claims C6a-C6c).

Expected shape (paper): untied input norms stay flat near their initial value; untied output
and tied norms rise with frequency up to about 10^4 occurrences, then fall. A trained run's
frequency is its exposure: how often its batches drew the token (`drawn`, tying.data.token_sets),
also given per million input positions trained on (`per_million`), so runs of any length
share one axis. The shape is measured on binned mean norms: tokens grouped by log10 draws,
1/4 decade per bin, and, walking down from the most frequent bin, a bin of fewer than
MIN_BIN_TOKENS tokens merged with the ones below it, but never over more than half a decade
(MAX_SPAN fine bins), so the most frequent tokens keep bins of their own; every token drawn at
least once is in a bin. spread = (largest - smallest binned mean) / median binned mean; rise and
fall = how far the peak bin lies above the lowest bin before it and after it, relative to the
peak (0 when the peak is the first or the last bin); drift = the largest relative change of a
bin's mean norm from the same tokens' step-0 norms, and net_drift the same against the step-0 norms
shrunk by the run's no-gradient level (tying.plan.decay): what the gradients did beyond the weight
decay alone. Chance level of rise-and-fall: the same
statistic with the norms shuffled across the tokens of each matrix (a flat profile by
construction, binned alike), `shuffled_rise_fall`.
"""

import numpy as np
import pandas as pd

from tying.errors import PipelineError

BINS_PER_DECADE = 4
MIN_BIN_TOKENS = 10
MAX_SPAN = 2  # fine bins a merged bin may span: half a decade
FREQUENCY = "drawn"  # the column binned: draws by the analysed step
RISE_FALL_MATRICES = ("untied_output", "tied")


def norm_frequency_frame(untied, tied, token_set, initial=None, levels=(np.nan, np.nan)):
    """Tidy row L2 norms of the untied input, untied output and tied matrices with their exposure.

    untied, tied: Embeddings over one vocabulary; token_set: frame with token_id, count
    (training-split occurrences) and, for a trained pair, drawn and per_million of the analysed
    tokens (tying.data.token_sets); initial: the two models' step-0 Embeddings (untied, tied), whose
    norms fill `initial_norm` (else NaN); levels: the two runs' no-gradient levels at the analysed step
    (tying.plan.decay.checkpoint_level; NaN: not recorded). Returns columns matrix ("untied_input",
    "untied_output", "tied"), token_id, count, drawn, per_million (NaN where the set has none), norm,
    initial_norm, no_gradient_level, n_tokens.
    """
    if untied.tokens != tied.tokens:
        raise PipelineError("norm-frequency needs the untied and tied models to share one vocabulary")
    keep, count = token_set["token_id"].to_numpy(), token_set["count"].to_numpy()
    if len(keep) and keep.max() >= len(untied.tokens):
        raise PipelineError(f"token set holds ids outside the vocabulary of {len(untied.tokens)} tokens")
    exposure = {c: token_set[c].to_numpy() if c in token_set.columns else np.nan for c in ("drawn", "per_million")}
    frames = []
    for name, (model, role) in {
        "untied_input": (0, "input"),
        "untied_output": (0, "output"),
        "tied": (1, "input"),
    }.items():
        norm = getattr((untied, tied)[model], role).norm(dim=1).numpy()[keep]
        start = np.nan if initial is None else getattr(initial[model], role).norm(dim=1).numpy()[keep]
        frames.append(
            pd.DataFrame(
                {
                    "matrix": name,
                    "token_id": keep,
                    "count": count,
                    **exposure,
                    "norm": norm,
                    "initial_norm": start,
                    "no_gradient_level": levels[model],
                }
            )
        )
    return pd.concat(frames, ignore_index=True).assign(n_tokens=len(keep))


def frequency_bins(count, bins_per_decade=BINS_PER_DECADE, min_tokens=MIN_BIN_TOKENS, max_span=MAX_SPAN):
    """Bin number (0 = rarest) of each count >= 1: 1/bins_per_decade-decade bins of log10 count, a
    sparse bin (< min_tokens) merged with the next rarer ones from the top down until it holds
    min_tokens or spans max_span fine bins, a sparse rarest leftover into the bin above it.
    count: (n,) ints >= 1 -> (n,) int64."""
    fine = np.floor(np.log10(count) * bins_per_decade).astype(np.int64)
    levels, sizes = np.unique(fine, return_counts=True)
    merged, label, filled, top = np.empty(len(levels), dtype=np.int64), 0, 0, None
    for i in range(len(levels) - 1, -1, -1):  # most frequent first
        if top is not None and top - levels[i] >= max_span:  # the open bin would span too much: close it
            label, filled, top = label + 1, 0, None
        top = levels[i] if top is None else top
        merged[i], filled = label, filled + sizes[i]
        if filled >= min_tokens:
            label, filled, top = label + 1, 0, None
    if filled and label and levels[merged == label - 1].max() - levels[0] < max_span:  # rarest leftover: join
        merged[merged == label] = label - 1  # the bin above
    merged = merged.max() - merged
    return merged[np.searchsorted(levels, fine)]


def binned_norms(frame, bins_per_decade=BINS_PER_DECADE, min_tokens=MIN_BIN_TOKENS, by=FREQUENCY):
    """Mean row norm per frequency bin (frequency_bins of column `by`), per matrix, over tokens with
    `by` >= 1.

    frame: columns matrix, `by`, norm (and optionally initial_norm, per_million). Returns columns
    matrix, bin, log_count (the bin's mean log10 `by`), count_low, count_high (its range of `by`),
    per_million_low, per_million_high (NaN without per_million), norm (mean), initial_norm (mean; NaN
    without it), tokens.
    """
    seen = frame[frame[by] >= 1]
    bins = seen.groupby("matrix")[by].transform(lambda c: frequency_bins(c.to_numpy(), bins_per_decade, min_tokens))
    seen = seen.assign(
        bin=bins,
        log_count=np.log10(seen[by]),
        frequency=seen[by],
        initial_norm=seen["initial_norm"] if "initial_norm" in seen.columns else np.nan,
        per_million=seen["per_million"] if "per_million" in seen.columns else np.nan,
    )
    return (
        seen.groupby(["matrix", "bin"], sort=True)
        .agg(
            log_count=("log_count", "mean"),
            count_low=("frequency", "min"),
            count_high=("frequency", "max"),
            per_million_low=("per_million", "min"),
            per_million_high=("per_million", "max"),
            norm=("norm", "mean"),
            initial_norm=("initial_norm", "mean"),
            tokens=("norm", "size"),
        )
        .reset_index()
    )


def rise_fall(means):
    """(rise, fall) of binned mean norms (n_bins,) -> floats, or of (n, n_bins) -> (n,) arrays: how far the
    peak lies above the lowest bin before and after it, relative to the peak; 0 at an end."""
    one = np.ndim(means) == 1
    means = np.atleast_2d(means)
    peak = means.argmax(axis=1)
    top = means[np.arange(len(means)), peak]
    cols = np.arange(means.shape[1])
    before = np.where(cols < peak[:, None], means, np.inf).min(axis=1)
    after = np.where(cols > peak[:, None], means, np.inf).min(axis=1)
    rise = np.where(peak > 0, (top - before) / top, 0.0)
    fall = np.where(peak < means.shape[1] - 1, (top - after) / top, 0.0)
    return (float(rise[0]), float(fall[0])) if one else (rise, fall)


def shape_stats(frame, bins_per_decade=BINS_PER_DECADE, min_tokens=MIN_BIN_TOKENS, by=FREQUENCY):
    """Shape of norm vs frequency per matrix, from binned_norms.

    spread: (max - min) / median of the binned mean norms (0 for a flat profile); rise, fall:
    (peak - lowest bin before the peak) / peak and (peak - lowest bin after it) / peak, 0 when
    the peak is at an end; peak_count: the peak bin's mean `by` (10 ** mean log10); drift: max over
    bins of |binned mean norm / binned mean step-0 norm - 1| (NaN without initial norms); net_drift: the
    same with each step-0 mean times 1 - the matrix's no_gradient_level, where a row no gradient reached
    would sit under decay alone (NaN without the level); spearman: rank correlation of norm with log10
    `by` over tokens.
    Returns columns matrix, bins, spread, rise, fall, peak_count, drift, net_drift, spearman (NaN where
    undefined).
    """
    binned = binned_norms(frame, bins_per_decade, min_tokens, by)
    rows = []
    for name, group in frame[frame[by] >= 1].groupby("matrix", sort=False):
        bins = binned[binned["matrix"] == name]
        means, start = bins["norm"].to_numpy(), bins["initial_norm"].to_numpy()
        level = group["no_gradient_level"].mean() if "no_gradient_level" in group.columns else np.nan
        rise, fall = rise_fall(means)
        rows.append(
            {
                "matrix": name,
                "bins": len(means),
                "spread": float((means.max() - means.min()) / np.median(means)),
                "rise": rise,
                "fall": fall,
                "peak_count": float(10 ** bins["log_count"].iloc[int(means.argmax())]),
                "drift": float(np.abs(means / start - 1).max()),
                "net_drift": float(np.abs(means / (start * (1 - level)) - 1).max()),
                "spearman": float(np.log10(group[by]).rank().corr(group["norm"].rank())),
            }
        )
    return pd.DataFrame(
        rows, columns=["matrix", "bins", "spread", "rise", "fall", "peak_count", "drift", "net_drift", "spearman"]
    )


def rise_and_fall(shape):
    """C6b's statistic from shape_stats: the smaller of rise and fall, the smaller over untied output and tied."""
    shape = shape.set_index("matrix")
    return float(min(min(shape.loc[m, "rise"], shape.loc[m, "fall"]) for m in RISE_FALL_MATRICES))


def shuffled_rise_fall(
    frame, shuffles, seed=0, bins_per_decade=BINS_PER_DECADE, min_tokens=MIN_BIN_TOKENS, by=FREQUENCY
):
    """C6b's statistic (rise_and_fall) with each matrix's norms shuffled across its tokens, `shuffles` times:
    the chance level of a profile flat by construction, binned as the real one -> (shuffles,) floats."""
    rng = np.random.default_rng(seed)
    worst = np.full(shuffles, np.inf)
    for name in RISE_FALL_MATRICES:
        rows = frame[(frame["matrix"] == name) & (frame[by] >= 1)]
        if rows.empty:
            raise PipelineError(f"no {name} rows with {by} >= 1 to shuffle")
        bins = frequency_bins(rows[by].to_numpy(), bins_per_decade, min_tokens)
        norms, sizes = rows["norm"].to_numpy(), np.bincount(bins)
        means = np.stack([np.bincount(bins, weights=rng.permutation(norms)) / sizes for _ in range(shuffles)])
        rise, fall = rise_fall(means)
        worst = np.minimum(worst, np.minimum(rise, fall))
    return worst

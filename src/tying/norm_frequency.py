"""Row norm of each token's embedding against its corpus frequency (Figure 5, claims C6a-C6c).

Expected shape (paper): untied input norms stay flat near their initial value; untied
output and tied norms rise with frequency up to about 10^4 occurrences, then fall. The shape
is measured on binned mean norms: tokens grouped by log10 count, 1/4 decade per bin, and,
walking down from the most frequent bin, a bin of fewer than MIN_BIN_TOKENS tokens merged
into the one below it (the rarest leftover into the bin above), so every token counted at
least once is in a bin, the most frequent ones included. spread = (largest - smallest binned
mean) / median binned mean; rise and fall = how far the peak bin lies above the lowest bin
before it and after it, relative to the peak (0 when the peak is the first or the last bin);
drift = the largest relative change of a bin's mean norm from the same tokens' step-0 norms.
"""
import numpy as np
import pandas as pd

from tying.errors import PipelineError

BINS_PER_DECADE = 4
MIN_BIN_TOKENS = 10


def norm_frequency_frame(untied, tied, token_set, initial=None):
    """Tidy row L2 norms of the untied input, untied output and tied matrices with counts.

    untied, tied: Embeddings over one vocabulary; token_set: frame with token_id and count
    (training-split occurrences) of the analysed tokens (tying.token_sets); initial: the two
    models' step-0 Embeddings (untied, tied), whose norms fill `initial_norm` (else NaN).
    Returns columns matrix ("untied_input", "untied_output", "tied"), token_id, count, norm,
    initial_norm, n_tokens.
    """
    if untied.tokens != tied.tokens:
        raise PipelineError("norm-frequency needs the untied and tied models to share one vocabulary")
    keep, count = token_set["token_id"].to_numpy(), token_set["count"].to_numpy()
    if len(keep) and keep.max() >= len(untied.tokens):
        raise PipelineError(f"token set holds ids outside the vocabulary of {len(untied.tokens)} tokens")
    frames = []
    for name, (model, role) in {"untied_input": (0, "input"), "untied_output": (0, "output"),
                                "tied": (1, "input")}.items():
        norm = getattr((untied, tied)[model], role).norm(dim=1).numpy()[keep]
        start = np.nan if initial is None else getattr(initial[model], role).norm(dim=1).numpy()[keep]
        frames.append(pd.DataFrame({"matrix": name, "token_id": keep, "count": count, "norm": norm,
                                    "initial_norm": start}))
    return pd.concat(frames, ignore_index=True).assign(n_tokens=len(keep))


def frequency_bins(count, bins_per_decade=BINS_PER_DECADE, min_tokens=MIN_BIN_TOKENS):
    """Bin number (0 = rarest) of each count >= 1: quarter-decade bins of log10 count, a sparse bin
    (< min_tokens) merged into the next rarer one from the top down, a sparse rarest leftover into
    the bin above it. count: (n,) ints >= 1 -> (n,) int64."""
    fine = np.floor(np.log10(count) * bins_per_decade).astype(np.int64)
    levels, sizes = np.unique(fine, return_counts=True)
    merged, label, filled = np.empty(len(levels), dtype=np.int64), 0, 0
    for i in range(len(levels) - 1, -1, -1):  # most frequent first
        merged[i], filled = label, filled + sizes[i]
        if filled >= min_tokens:
            label, filled = label + 1, 0
    if filled and label:  # the rarest bins fell short: join them to the bin above
        merged[merged == label] = label - 1
    merged = merged.max() - merged
    return merged[np.searchsorted(levels, fine)]


def binned_norms(frame, bins_per_decade=BINS_PER_DECADE, min_tokens=MIN_BIN_TOKENS):
    """Mean row norm per frequency bin (frequency_bins), per matrix, over tokens with count >= 1.

    frame: columns matrix, count, norm (and optionally initial_norm). Returns columns matrix,
    bin, log_count (the bin's mean log10 count), count_low, count_high, norm (mean),
    initial_norm (mean; NaN without it), tokens.
    """
    seen = frame[frame["count"] >= 1]
    bins = seen.groupby("matrix")["count"].transform(lambda c: frequency_bins(c.to_numpy(), bins_per_decade,
                                                                            min_tokens))
    seen = seen.assign(bin=bins, log_count=np.log10(seen["count"]),
                       initial_norm=seen["initial_norm"] if "initial_norm" in seen.columns else np.nan)
    return (seen.groupby(["matrix", "bin"], sort=True)
            .agg(log_count=("log_count", "mean"), count_low=("count", "min"), count_high=("count", "max"),
                 norm=("norm", "mean"), initial_norm=("initial_norm", "mean"), tokens=("norm", "size"))
            .reset_index())


def shape_stats(frame, bins_per_decade=BINS_PER_DECADE, min_tokens=MIN_BIN_TOKENS):
    """Shape of norm vs frequency per matrix, from binned_norms.

    spread: (max - min) / median of the binned mean norms (0 for a flat profile); rise, fall:
    (peak - lowest bin before the peak) / peak and (peak - lowest bin after it) / peak, 0 when
    the peak is at an end; peak_count: the peak bin's mean occurrences (10 ** mean log10 count);
    drift: max over bins of |binned mean norm / binned mean step-0 norm - 1| (NaN without
    initial norms); spearman: rank correlation of norm with log10 count over tokens.
    Returns columns matrix, bins, spread, rise, fall, peak_count, drift, spearman (NaN where undefined).
    """
    binned = binned_norms(frame, bins_per_decade, min_tokens)
    rows = []
    for name, group in frame[frame["count"] >= 1].groupby("matrix", sort=False):
        bins = binned[binned["matrix"] == name]
        means = bins["norm"].to_numpy()
        peak = int(means.argmax())
        rank_corr = np.log10(group["count"]).rank().corr(group["norm"].rank())
        rows.append({
            "matrix": name, "bins": len(means), "spread": float((means.max() - means.min()) / np.median(means)),
            "rise": float((means[peak] - means[:peak].min()) / means[peak]) if peak > 0 else 0.0,
            "fall": float((means[peak] - means[peak + 1:].min()) / means[peak]) if peak < len(means) - 1 else 0.0,
            "peak_count": float(10 ** bins["log_count"].iloc[peak]),
            "drift": float(np.abs(means / bins["initial_norm"].to_numpy() - 1).max()),
            "spearman": float(rank_corr),
        })
    return pd.DataFrame(rows, columns=["matrix", "bins", "spread", "rise", "fall", "peak_count", "drift", "spearman"])

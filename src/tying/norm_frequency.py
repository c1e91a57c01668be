"""Row norm of each token's embedding against its corpus frequency (Figure 5, claims C6a, C6b).

Expected shape (paper): untied input norms stay flat near their initial value; untied
output and tied norms rise with frequency up to about 10^4 occurrences, then fall. The shape
is measured on binned mean norms (tokens grouped by log10 count, 1/4 decade per bin, bins of
at least MIN_BIN_TOKENS tokens): spread = (largest - smallest binned mean) / median binned
mean; rise and fall = how far the peak bin lies above the lowest bin before it and after it,
relative to the peak (0 when the peak is the first or the last bin).
"""
import numpy as np
import pandas as pd

from tying.errors import PipelineError
from tying.token_sets import counts_by_id


BINS_PER_DECADE = 4
MIN_BIN_TOKENS = 10


def norm_frequency_frame(untied, tied, counts, min_count=1):
    """Tidy row L2 norms of the untied input, untied output and tied matrices with counts.

    untied, tied: Embeddings over one vocabulary; counts: frame with token_id and count
    (token ids of that vocabulary; a token absent from it has count 0). Tokens seen fewer
    than `min_count` times are left out.
    Returns columns matrix ("untied_input", "untied_output", "tied"), token_id, count, norm, n_tokens.
    """
    if untied.tokens != tied.tokens:
        raise PipelineError("norm-frequency needs the untied and tied models to share one vocabulary")
    count = counts_by_id(counts, len(untied.tokens))
    keep = np.flatnonzero(count >= min_count)
    matrices = {"untied_input": untied.input, "untied_output": untied.output, "tied": tied.input}
    return pd.concat(
        [
            pd.DataFrame({"matrix": name, "token_id": keep, "count": count[keep], "norm": m.norm(dim=1).numpy()[keep]})
            for name, m in matrices.items()
        ],
        ignore_index=True,
    ).assign(n_tokens=len(keep))


def binned_norms(frame, bins_per_decade=BINS_PER_DECADE, min_tokens=MIN_BIN_TOKENS):
    """Mean row norm per log10-count bin, per matrix, over tokens with count >= 1.

    frame: columns matrix, count, norm. Bins hold the tokens with floor(log10(count) *
    bins_per_decade) equal; bins with fewer than `min_tokens` tokens are dropped.
    Returns columns matrix, log_count (the bin's centre), norm (mean), tokens.
    """
    seen = frame[frame["count"] >= 1]
    bins = (np.floor(np.log10(seen["count"]) * bins_per_decade) + 0.5) / bins_per_decade
    binned = (seen.assign(log_count=bins).groupby(["matrix", "log_count"], sort=True)["norm"]
              .agg(norm="mean", tokens="size").reset_index())
    return binned[binned["tokens"] >= min_tokens].reset_index(drop=True)


def shape_stats(frame, bins_per_decade=BINS_PER_DECADE, min_tokens=MIN_BIN_TOKENS):
    """Shape of norm vs frequency per matrix, from binned_norms.

    spread: (max - min) / median of the binned mean norms (0 for a flat profile); rise, fall:
    (peak - lowest bin before the peak) / peak and (peak - lowest bin after it) / peak, 0 when
    the peak is at an end; spearman: rank correlation of norm with log10 count over tokens.
    Returns columns matrix, bins, spread, rise, fall, spearman (NaN where undefined).
    """
    binned = binned_norms(frame, bins_per_decade, min_tokens)
    rows = []
    for name, group in frame[frame["count"] >= 1].groupby("matrix", sort=False):
        means = binned.loc[binned["matrix"] == name, "norm"].to_numpy()
        spread = rise = fall = np.nan
        if len(means):
            peak = int(means.argmax())
            spread = (means.max() - means.min()) / np.median(means)
            rise = (means[peak] - means[:peak].min()) / means[peak] if peak > 0 else 0.0
            fall = (means[peak] - means[peak + 1:].min()) / means[peak] if peak < len(means) - 1 else 0.0
        rank_corr = np.log10(group["count"]).rank().corr(group["norm"].rank())
        rows.append({"matrix": name, "bins": len(means), "spread": float(spread), "rise": float(rise),
                     "fall": float(fall), "spearman": float(rank_corr)})
    return pd.DataFrame(rows, columns=["matrix", "bins", "spread", "rise", "fall", "spearman"])

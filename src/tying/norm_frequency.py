"""Row norm of each token's embedding against its corpus frequency (Figure 5, claim C6).

Expected shape (paper): untied input norms stay flat near their initial value; untied
output and tied norms rise with frequency up to about 10^4 occurrences, then fall.
"""
import numpy as np
import pandas as pd

from tying.errors import PipelineError


def norm_frequency_frame(untied, tied, counts):
    """Tidy row L2 norms of the untied input, untied output and tied matrices with counts.

    untied, tied: Embeddings over one vocabulary; counts: frame with token_id and count
    (token ids of that vocabulary; a token absent from it has count 0).
    Returns columns matrix ("untied_input", "untied_output", "tied"), token_id, count, norm.
    """
    if untied.tokens != tied.tokens:
        raise PipelineError("norm-frequency needs the untied and tied models to share one vocabulary")
    vocab = len(untied.tokens)
    ids = counts["token_id"].to_numpy()
    if len(ids) and (ids.min() < 0 or ids.max() >= vocab):
        raise PipelineError(f"token counts hold ids outside the vocabulary of {vocab} tokens")
    count = np.zeros(vocab, dtype=np.int64)
    np.add.at(count, ids, counts["count"].to_numpy())
    matrices = {"untied_input": untied.input, "untied_output": untied.output, "tied": tied.input}
    return pd.concat(
        [
            pd.DataFrame({"matrix": name, "token_id": np.arange(vocab), "count": count, "norm": m.norm(dim=1).numpy()})
            for name, m in matrices.items()
        ],
        ignore_index=True,
    )


def shape_stats(frame):
    """Numeric shape of norm vs frequency per matrix, over tokens with count >= 1.

    spearman: Spearman rank correlation of norm with log10(count) (how strongly norm
    follows frequency; near 0 for a flat cloud, NaN when all norms are equal). spread: interquartile range of the norms
    divided by their median (near 0 when norms stay at one value, as untied input norms do).
    frame: columns matrix, count, norm. Returns columns matrix, spearman, spread.
    """
    rows = []
    for name, group in frame[frame["count"] >= 1].groupby("matrix", sort=False):
        norm = group["norm"]
        q1, median, q3 = norm.quantile([0.25, 0.5, 0.75])
        rank_corr = np.log10(group["count"]).rank().corr(norm.rank())
        rows.append({"matrix": name, "spearman": float(rank_corr), "spread": float((q3 - q1) / median)})
    return pd.DataFrame(rows, columns=["matrix", "spearman", "spread"])

"""Which tokens an analysis uses: those seen at least `min_count` times in the training split.

Rows of tokens never seen in training stay near their shared drift direction and inflate
alignment (METHODS.md, Statistics), so trained-run analyses leave them out.
"""
import numpy as np
import pandas as pd

from tying.errors import PipelineError


def counts_by_id(counts, vocab):
    """(vocab,) int64 training-split count of each id from a frame with token_id and count (absent: 0)."""
    ids = counts["token_id"].to_numpy()
    if len(ids) and (ids.min() < 0 or ids.max() >= vocab):
        raise PipelineError(f"token counts hold ids outside the vocabulary of {vocab} tokens")
    count = np.zeros(vocab, dtype=np.int64)
    np.add.at(count, ids, counts["count"].to_numpy())
    return count


def seen_ids(counts, vocab, min_count):
    """Ids (ascending) of the tokens counted at least `min_count` times; a PipelineError if fewer than 2."""
    ids = np.flatnonzero(counts_by_id(counts, vocab) >= min_count)
    if len(ids) < 2:
        raise PipelineError(f"only {len(ids)} tokens occur at least {min_count} times (analysis.min_count)")
    return ids


def analysed_tokens(inputs, embeddings, analysis):
    """The token ids a metric job keeps: seen_ids when its inputs hold training-split `counts`
    (a trained pair), else None (every real row of a released model)."""
    if "counts" not in inputs.keys():
        return None
    return seen_ids(pd.read_parquet(inputs.counts), len(embeddings.tokens), analysis["min_count"])

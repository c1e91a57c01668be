"""Which tokens a trained pair's analyses use: those its runs' training batches drew.

Rows of tokens never drawn stay near their shared drift direction and inflate alignment, and
an untied input row never drawn keeps its direction exactly, inflating drift (METHODS.md,
Statistics). Batches are a pure function of (seed, step) (tying.train.train_batch), so the
tokens at the input positions of every batch a run trained on can be counted again after the
fact. One token set per (pair, seed) is written once and read by every metric of the pair,
evolution included: the tokens each run of the pair drew at least `min_count` times.
"""
import numpy as np
import pandas as pd

from tying.errors import PipelineError
from tying.io import write_parquet


def counts_by_id(counts, vocab):
    """(vocab,) int64 count of each id from a frame with token_id and count (absent: 0)."""
    ids = counts["token_id"].to_numpy()
    if len(ids) and (ids.min() < 0 or ids.max() >= vocab):
        raise PipelineError(f"token counts hold ids outside the vocabulary of {vocab} tokens")
    count = np.zeros(vocab, dtype=np.int64)
    np.add.at(count, ids, counts["count"].to_numpy())
    return count


def drawn_counts(ids, vocab, seed, steps, batch_size, seq_len):
    """(vocab,) int64: how often each id sat at an input position of the batches of steps 1..steps."""
    from tying.train import train_batch  # here: the metric jobs that read a token set never import transformers

    drawn = np.zeros(vocab, dtype=np.int64)
    for step in range(1, steps + 1):
        inputs, _ = train_batch(ids, step, seed, batch_size, seq_len)
        drawn += np.bincount(inputs.numpy().ravel(), minlength=vocab)
    return drawn


def token_set_frame(split_counts, drawn, min_count):
    """The analysed tokens: drawn at least `min_count` times by every run of a pair.

    split_counts: (V,) training-split occurrences; drawn: (V,) per run, its drawn_counts.
    Returns columns token_id, count (training-split occurrences), drawn (the fewest over the runs).
    """
    fewest = np.min(np.stack(drawn), axis=0)
    keep = np.flatnonzero(fewest >= min_count)
    if len(keep) < 2:
        raise PipelineError(f"only {len(keep)} tokens were drawn at least {min_count} times in training "
                            "(analysis.min_count)")
    return pd.DataFrame({"token_id": keep, "count": split_counts[keep], "drawn": fewest[keep]})


def write_token_set(ids, counts, runs, min_count, path):
    """results/token_sets/{pair}/seed{seed}.parquet from the training split `ids`, its token `counts`
    frame and each run's batch shape `runs` [(seed, steps, batch_size, seq_len)], plus n_tokens."""
    vocab = int(counts["token_id"].max()) + 1
    drawn = [drawn_counts(ids, vocab, *run) for run in sorted(set(map(tuple, runs)))]
    frame = token_set_frame(counts_by_id(counts, vocab), drawn, min_count)
    write_parquet(frame.assign(n_tokens=len(frame)), path)


def analysed_tokens(path):
    """Token ids (ascending) of the token set at `path`; None for no path (a released pair keeps
    every real row)."""
    return None if path is None else pd.read_parquet(path, columns=["token_id"])["token_id"].to_numpy()

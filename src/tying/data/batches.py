"""The batches a run trains and evaluates on: pure functions of the token ids, the seed and the step.

Apart from the training loop so that a job that counts what a run drew (tying.data.token_sets) imports
numpy and torch, not transformers."""

import functools

import numpy as np
import torch

from tying.errors import PipelineError


def window_count(n_tokens, seq_len):
    """How many non-overlapping (seq_len + 1)-token training windows at stride seq_len a split of
    `n_tokens` holds: window w is ids[w * seq_len : (w + 1) * seq_len + 1]."""
    n = (n_tokens - 1) // seq_len
    if n < 1:
        raise PipelineError(f"training split has {n_tokens} tokens, fewer than one window of {seq_len + 1}")
    return n


def drawn_windows(n, seed, batch_size, first_step, last_step):
    """The window indices of the batches of steps first..last (from 1), in the order they are drawn: the
    concatenated epochs, each a permutation of the `n` windows seeded by (seed, epoch). (int64 array)"""
    positions = np.arange((first_step - 1) * batch_size, last_step * batch_size)
    epochs, slots = np.divmod(positions, n)
    return np.concatenate([_epoch_order(n, seed, int(e))[slots[epochs == e]] for e in np.unique(epochs)])


def train_batch(ids, step, seed, batch_size, seq_len):
    """Batch of step `step` (from 1): the next batch_size windows of drawn_windows. A pure function of
    (len(ids), seed, step), so every variant of a seed sees the same batches in the same order, a resumed
    run needs no loader state, and each epoch reads every window once. Returns (inputs, targets), each
    (batch_size, seq_len) int64."""
    starts = drawn_windows(window_count(len(ids), seq_len), seed, batch_size, step, step) * seq_len
    windows = torch.from_numpy(np.stack([np.asarray(ids[s : s + seq_len + 1], dtype=np.int64) for s in starts]))
    return windows[:, :-1], windows[:, 1:]


@functools.lru_cache(maxsize=4)
def _epoch_order(n_windows, seed, epoch):
    """The window indices of epoch `epoch` in their seeded order (read-only: shared by the cache)."""
    order = torch.randperm(n_windows, generator=torch.Generator().manual_seed(seed * 1_000_003 + epoch)).numpy()
    order.flags.writeable = False
    return order


def eval_batches(ids, n_batches, batch_size, seq_len):
    """Fixed validation batches: consecutive non-overlapping windows from the start of `ids`."""
    n_windows = min(n_batches * batch_size, (len(ids) - 1) // seq_len)
    if n_windows < 1:
        raise ValueError(f"validation split has {len(ids)} tokens, fewer than one window of {seq_len + 1}")
    windows = np.asarray(ids[: n_windows * seq_len + 1], dtype=np.int64)
    x = torch.from_numpy(windows[:-1].reshape(n_windows, seq_len))
    y = torch.from_numpy(windows[1:].reshape(n_windows, seq_len))
    return list(zip(x.split(batch_size), y.split(batch_size)))

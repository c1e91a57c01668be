"""Count-table baselines: how well a unigram and a bigram table counted from a run's own draws predict the
validation targets the run's loss is scored on.

A trained run's claims describe a language model only once the model predicts held-out text better than a
count table of the tokens it trained on (docs/statistics.md, "Model quality"). Batches are a pure function
of (seed, step) (tying.batches), so the (input, target) pairs a run trained on by step s are those of the
windows it drew by then, each as often as drawn. From their counts c:
- unigram: p(b) = (c(b) + 1) / (N + V) over the N targets drawn (add-one: no target has probability 0);
- bigram: p(b | a) = w c(a, b) / c(a) + (1 - w) p(b), interpolated with the unigram (the unigram alone for
  an a never drawn).
The weight w is chosen on held-out training tokens, never on the validation split: the drawn windows fall in
FOLDS contiguous blocks of the corpus, each block's pairs are scored with counts from the other blocks, and w
maximises their summed log-likelihood (concave in w: found by bisection of its derivative).
"""
import numpy as np
import pandas as pd

from tying.batches import drawn_windows, eval_batches, window_count
from tying.io import write_parquet

FOLDS = 5
COLUMNS = ["step", "positions", "targets", "unigram_loss", "bigram_loss", "bigram_weight"]


def validation_pairs(val_ids, n_batches, batch_size, seq_len):
    """(inputs, targets) of the validation batches a run's loss is scored on (tying.batches.eval_batches),
    each a flat int64 array."""
    batches = eval_batches(val_ids, n_batches, batch_size, seq_len)
    return tuple(np.concatenate([b[i].numpy().ravel() for b in batches]) for i in (0, 1))


class DrawnPairs:
    """The (input, target) pairs of the windows a run shape drew, counted at any step up to `steps`.

    Pairs are keyed a * vocab + b; `keys` holds each distinct key of the windows ever drawn, `index` the key
    of every pair of those windows (one row per window), so a step's counts are a weighted bincount of
    `index` by how often each window had been drawn.
    """

    def __init__(self, ids, vocab, seed, steps, batch_size, seq_len):
        n = window_count(len(ids), seq_len)
        self.vocab, self.batch_size, self.seq_len = vocab, batch_size, seq_len
        self.order = drawn_windows(n, seed, batch_size, 1, steps) if steps else np.zeros(0, np.int64)
        self.windows = np.unique(self.order)
        starts = self.windows * seq_len
        tokens = np.stack([np.asarray(ids[s:s + seq_len + 1], dtype=np.int64) for s in starts]) if len(starts) \
            else np.zeros((0, seq_len + 1), np.int64)
        self.keys, index = np.unique(tokens[:, :-1] * vocab + tokens[:, 1:], return_inverse=True)
        self.index = index.reshape(len(starts), seq_len)
        self.fold = self.windows * FOLDS // n  # contiguous blocks of the corpus

    def draws(self, step):
        """(windows,) how often each of `windows` was drawn by `step`."""
        return np.bincount(np.searchsorted(self.windows, self.order[:step * self.batch_size]),
                           minlength=len(self.windows))

    def counts(self, draws):
        """(keys,) float64 count of each key when the windows were drawn `draws` times."""
        weights = np.broadcast_to(draws[:, None], self.index.shape).ravel()
        return np.bincount(self.index.ravel(), weights=weights, minlength=len(self.keys))


def unigram_probability(counts, keys, vocab, targets):
    """Add-one unigram probability of each of `targets` from pair counts."""
    target_counts = np.bincount(keys % vocab, weights=counts, minlength=vocab)
    return (target_counts[targets] + 1) / (counts.sum() + vocab)


def bigram_parts(counts, keys, vocab, inputs, targets):
    """(ratio, seen, unigram) per (input, target) pair: c(a, b) / c(a), whether a was drawn, and p(b)."""
    context = np.bincount(keys // vocab, weights=counts, minlength=vocab)[inputs]
    seen = context > 0
    pair = _lookup(keys, counts, inputs * vocab + targets)
    return pair / np.where(seen, context, 1), seen, unigram_probability(counts, keys, vocab, targets)


def _lookup(keys, counts, query):
    """The count of each `query` key in sorted `keys` (0 where absent)."""
    if not len(keys):
        return np.zeros(len(query))
    at = np.minimum(np.searchsorted(keys, query), len(keys) - 1)
    return np.where(keys[at] == query, counts[at], 0.0)


def bigram_probability(weight, ratio, seen, unigram):
    return np.where(seen, weight * ratio + (1 - weight) * unigram, unigram)


def interpolation_weight(pairs, draws, iterations=40):
    """The bigram weight that maximises the held-out log-likelihood of the drawn pairs, each fold of windows
    scored with counts from the others (each pair as often as drawn); NaN when nothing is held out."""
    parts, total = [], pairs.counts(draws)
    for fold in range(FOLDS):
        held = np.where(pairs.fold == fold, draws, 0)
        if not held.any():
            continue
        held_counts = pairs.counts(held)
        rest = total - held_counts
        scored = np.flatnonzero(held_counts)
        keys = pairs.keys[scored]
        ratio, seen, unigram = bigram_parts(rest, pairs.keys, pairs.vocab, keys // pairs.vocab, keys % pairs.vocab)
        parts.append((held_counts[scored][seen], ratio[seen], unigram[seen]))
    if not parts:
        return np.nan
    count, ratio, unigram = (np.concatenate(p) for p in zip(*parts))

    def slope(w):  # d/dw of sum(count * log(w ratio + (1 - w) unigram)): decreasing in w
        return float(np.sum(count * (ratio - unigram) / (w * ratio + (1 - w) * unigram)))

    low, high = 0.0, 1.0 - 1e-9
    if slope(low) <= 0:
        return 0.0
    if slope(high) >= 0:
        return high
    for _ in range(iterations):
        mid = (low + high) / 2
        low, high = (mid, high) if slope(mid) > 0 else (low, mid)
    return (low + high) / 2


def count_baselines(train_ids, val_ids, vocab, run, n_batches, at):
    """The unigram and bigram baselines of one run shape (seed, steps, batch_size, seq_len) at each step of
    `at`, on the targets of its `n_batches` validation batches -> DataFrame of COLUMNS (losses in nats)."""
    seed, steps, batch_size, seq_len = run
    inputs, targets = validation_pairs(val_ids, n_batches, batch_size, seq_len)
    pairs = DrawnPairs(train_ids, vocab, seed, max(at), batch_size, seq_len)
    rows = []
    for step in sorted(at):
        draws = pairs.draws(step)
        counts = pairs.counts(draws)
        weight = interpolation_weight(pairs, draws) if step else np.nan
        ratio, seen, unigram = bigram_parts(counts, pairs.keys, vocab, inputs, targets)
        bigram = unigram if np.isnan(weight) else bigram_probability(weight, ratio, seen, unigram)
        rows.append({"step": step, "positions": step * batch_size * seq_len, "targets": len(targets),
                     "unigram_loss": float(-np.log(unigram).mean()), "bigram_loss": float(-np.log(bigram).mean()),
                     "bigram_weight": weight})
    return pd.DataFrame(rows, columns=COLUMNS)


def write_baselines(train_ids, val_ids, vocab, run, n_batches, at, path):
    """results/baselines/...: count_baselines of one run shape."""
    write_parquet(count_baselines(train_ids, val_ids, vocab, run, n_batches, at), path)

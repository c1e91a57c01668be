"""Count-table baselines: how well a unigram and a bigram table counted from a run's own draws predict the
validation targets the run's loss is scored on.

A trained run's claims describe a language model only once the model predicts held-out text better than a
count table of the tokens it trained on (docs/statistics.md, "Model quality"). Batches are a pure function
of (seed, step) (tying.data.batches), so the (input, target) pairs a run trained on by step s are those of the
windows it drew by then, each as often as drawn. From their counts c:
- unigram: p(b) = (c(b) + 1) / (N + V) over the N targets drawn (add-one: no target has probability 0);
- bigram: p(b | a) = w c(a, b) / c(a) + (1 - w) p(b), interpolated with the unigram (the unigram alone for
  an a never drawn).
The weight w is chosen on held-out training tokens, never on the validation split: the drawn windows fall in
FOLDS contiguous blocks of the corpus, each block's pairs are scored with counts from the other blocks, and w
maximises their summed log-likelihood (concave in w: found by bisection of its derivative). A run that drew
more than HELD_OUT_PAIRS pairs scores an evenly spaced sample of its drawn windows; the counts are always
every drawn pair's. Memory is the distinct pairs scored (validation and held out) per fold, not the pairs
drawn, so a paper-scale run is counted in one pass over its draws.
"""

import numpy as np
import pandas as pd

from tying.data.batches import drawn_windows, eval_batches, window_count
from tying.io import write_parquet

FOLDS = 5
HELD_OUT_PAIRS = 1 << 22
CHUNK_WINDOWS = 4096  # drawn windows read at a time
COLUMNS = ["step", "positions", "targets", "unigram_loss", "bigram_loss", "bigram_weight"]


def validation_pairs(val_ids, n_batches, batch_size, seq_len):
    """(inputs, targets) of the validation batches a run's loss is scored on (tying.data.batches.eval_batches),
    each a flat int64 array."""
    batches = eval_batches(val_ids, n_batches, batch_size, seq_len)
    return tuple(np.concatenate([b[i].numpy().ravel() for b in batches]) for i in (0, 1))


def window_pairs(ids, windows, seq_len, vocab):
    """(windows, seq_len) int64 keys a * vocab + b of the (input, target) pairs of each window."""
    if not len(windows):
        return np.zeros((0, seq_len), np.int64)
    tokens = np.stack([np.asarray(ids[w * seq_len : (w + 1) * seq_len + 1], dtype=np.int64) for w in windows])
    return tokens[:, :-1] * vocab + tokens[:, 1:]


class Counts:
    """Per-fold counts of the pairs a run drew: each fold's count of every `keys` pair (sorted query keys), of
    every input and of every target. `add` takes drawn windows as they come; a fold's row holds the pairs of
    the drawn windows in that block of the corpus."""

    def __init__(self, keys, vocab):
        self.keys, self.vocab = keys, vocab
        self.pair = np.zeros((FOLDS, len(keys)))
        self.inputs = np.zeros((FOLDS, vocab))
        self.targets = np.zeros((FOLDS, vocab))

    def add(self, pairs, folds):
        """Count `pairs` ((windows, seq_len) keys) of windows in `folds` ((windows,) fold of each)."""
        fold = np.broadcast_to(folds[:, None], pairs.shape).ravel()
        flat = pairs.ravel()
        for counts, index in ((self.inputs, flat // self.vocab), (self.targets, flat % self.vocab)):
            counts += np.bincount(fold * self.vocab + index, minlength=counts.size).reshape(counts.shape)
        at = _positions(self.keys, flat)
        found = at >= 0
        self.pair += np.bincount(fold[found] * len(self.keys) + at[found], minlength=self.pair.size).reshape(
            self.pair.shape
        )

    def total(self):
        """(pair, inputs, targets) summed over the folds."""
        return self.pair.sum(0), self.inputs.sum(0), self.targets.sum(0)

    def without(self, fold):
        """(pair, inputs, targets) of every fold but `fold`."""
        return tuple(c.sum(0) - c[fold] for c in (self.pair, self.inputs, self.targets))


def _positions(keys, query):
    """Index of each `query` key in sorted `keys`, -1 where absent."""
    if not len(keys):
        return np.full(len(query), -1)
    at = np.minimum(np.searchsorted(keys, query), len(keys) - 1)
    return np.where(keys[at] == query, at, -1)


def table_parts(counts, query):
    """(ratio, seen, unigram) of each query key from (pair, inputs, targets) counts of `Counts.keys`:
    c(a, b) / c(a), whether a was drawn, and the add-one unigram p(b)."""
    (pair, inputs, targets), keys, vocab = counts
    at = _positions(keys, query)
    a, b = query // vocab, query % vocab
    seen = inputs[a] > 0
    joint = np.where(at >= 0, pair[np.maximum(at, 0)], 0.0)
    return joint / np.where(seen, inputs[a], 1), seen, (targets[b] + 1) / (targets.sum() + vocab)


def bigram_probability(weight, ratio, seen, unigram):
    return np.where(seen, weight * ratio + (1 - weight) * unigram, unigram)


def interpolation_weight(scored, iterations=40):
    """The weight maximising sum(count * log(w ratio + (1 - w) unigram)) over `scored` (count, ratio, unigram)
    of the held-out pairs whose input was drawn elsewhere; NaN when there are none."""
    count, ratio, unigram = scored
    if not count.sum():
        return np.nan

    def slope(w):  # the derivative in w: decreasing
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


def held_out_parts(counts, held, held_folds, draws):
    """`interpolation_weight`'s input: each held-out window's pairs, as often as drawn, scored with the counts
    of the other folds. held: (windows, seq_len) keys of the held-out sample; held_folds, draws: each
    window's fold and draws by the step."""
    parts = []
    for fold in range(FOLDS):
        mine = (held_folds == fold) & (draws > 0)
        if not mine.any():
            continue
        keys, inverse = np.unique(held[mine], return_inverse=True)
        weight = np.bincount(inverse.ravel(), weights=np.repeat(draws[mine], held.shape[1]), minlength=len(keys))
        ratio, seen, unigram = table_parts((counts.without(fold), counts.keys, counts.vocab), keys)
        parts.append((weight[seen], ratio[seen], unigram[seen]))
    return tuple(np.concatenate(p) for p in zip(*parts)) if parts else (np.zeros(0),) * 3


def count_baselines(train_ids, val_ids, vocab, run, n_batches, at):
    """The unigram and bigram baselines of one run shape (seed, steps, batch_size, seq_len) at each step of
    `at`, on the targets of its `n_batches` validation batches -> DataFrame of COLUMNS (losses in nats)."""
    seed, _, batch_size, seq_len = run
    n = window_count(len(train_ids), seq_len)
    at = sorted(at)
    order = drawn_windows(n, seed, batch_size, 1, at[-1]) if at[-1] else np.zeros(0, np.int64)
    return _baselines(
        train_ids, val_ids, vocab, order, {step: step * batch_size for step in at}, n_batches, batch_size, seq_len
    )


def corpus_baselines(train_ids, val_ids, vocab, n_batches, batch_size, seq_len):
    """The unigram and bigram baselines counted from every training window once, on the targets of `n_batches`
    validation batches -> one row of COLUMNS, step 0: the tables a model the pipeline did not train must beat
    (its own training data unknown: the corpus's training split in its tokenizer)."""
    n = window_count(len(train_ids), seq_len)
    return _baselines(train_ids, val_ids, vocab, np.arange(n), {0: n}, n_batches, batch_size, seq_len)


def _baselines(train_ids, val_ids, vocab, order, ends, n_batches, batch_size, seq_len):
    """count_baselines's rows from the windows drawn, `order`, and `ends` ({step: windows drawn by then},
    ascending): at each step, the tables of order[:end]."""
    n = window_count(len(train_ids), seq_len)
    drawn = np.unique(order)
    sample = (
        drawn[np.unique(np.linspace(0, len(drawn) - 1, min(len(drawn), HELD_OUT_PAIRS // seq_len)).astype(int))]
        if len(drawn)
        else drawn
    )
    held = window_pairs(train_ids, sample, seq_len, vocab)
    inputs, targets = validation_pairs(val_ids, n_batches, batch_size, seq_len)
    query = inputs * vocab + targets
    counts = Counts(np.unique(np.concatenate([query, held.ravel()])), vocab)
    rows, done = [], 0
    for step, end in ends.items():
        new = order[done:end]
        for start in range(0, len(new), CHUNK_WINDOWS):
            chunk = new[start : start + CHUNK_WINDOWS]
            counts.add(window_pairs(train_ids, chunk, seq_len, vocab), chunk * FOLDS // n)
        done = end
        draws = np.bincount(np.searchsorted(drawn, order[:end]), minlength=len(drawn))
        weight = interpolation_weight(
            held_out_parts(counts, held, sample * FOLDS // n, draws[np.searchsorted(drawn, sample)])
        )
        ratio, seen, unigram = table_parts((counts.total(), counts.keys, vocab), query)
        bigram = unigram if np.isnan(weight) else bigram_probability(weight, ratio, seen, unigram)
        rows.append(
            {
                "step": step,
                "positions": end * seq_len,
                "targets": len(targets),
                "unigram_loss": float(-np.log(unigram).mean()),
                "bigram_loss": float(-np.log(bigram).mean()),
                "bigram_weight": weight,
            }
        )
    return pd.DataFrame(rows, columns=COLUMNS)


def write_baselines(train_ids, val_ids, vocab, run, n_batches, at, path):
    """results/baselines/...: count_baselines of one run shape."""
    write_parquet(count_baselines(train_ids, val_ids, vocab, run, n_batches, at), path)

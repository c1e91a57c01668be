"""Which tokens a trained pair's analyses use, and how often its runs drew each (its exposure).

Rows of tokens never drawn stay near their shared drift direction and inflate alignment, and
an untied input row never drawn keeps its direction exactly, inflating drift (docs/methods.md,
Token sets). Batches are a pure function of (seed, step) (tying.data.batches.train_batch), so the
tokens at the input positions of every batch a run trained on can be counted again after the
fact: once per run shape (seed, steps, batch size, sequence length), at every checkpoint step,
whatever pairs share that shape. A pair's token set (one per pair and seed, read by every metric
of the pair, evolution included) is the tokens each of its runs drew at least `min_count` times
by the compared step; its `drawn` column is each token's exposure there, the fewest over the
runs. The set by step keeps, for the claims over training, the same tokens' exposure at every
checkpoint: the tokens seen by a checkpoint are those drawn `min_count` times by it.

A token's lookup share is the share of steps whose batch held it at an input position at least once: the
steps in which its input row got a lookup gradient (every output row gets one at every step). With
batches of 1,024 tokens a token drawn 100 times is looked up in at most 10% of the steps; the paper's
2.1M-token batches looked up nearly every row at every step (tying.claims.exposure's claims by lookup share).
"""

import numpy as np
import pandas as pd

from tying.errors import PipelineError
from tying.io import write_parquet

DRAWN_COLUMNS = ["step", "token_id", "drawn", "positions", "looked_up"]


def counts_by_id(counts, vocab):
    """(vocab,) int64 count of each id from a frame with token_id and count (absent: 0)."""
    ids = counts["token_id"].to_numpy()
    if len(ids) and (ids.min() < 0 or ids.max() >= vocab):
        raise PipelineError(f"token counts hold ids outside the vocabulary of {vocab} tokens")
    count = np.zeros(vocab, dtype=np.int64)
    np.add.at(count, ids, counts["count"].to_numpy())
    return count


def drawn_by_step(ids, vocab, seed, steps, batch_size, seq_len, at=None):
    """{s: (vocab,) int64} for each s of `at` (default: only `steps`): how often each id sat at an input
    position of the batches of steps 1..s."""
    return _by_step(ids, vocab, seed, steps, batch_size, seq_len, at, lambda counts: counts)


def lookups_by_step(ids, vocab, seed, steps, batch_size, seq_len, at=None):
    """{s: (vocab,) int64} for each s of `at` (default: only `steps`): in how many of the steps 1..s each id
    sat at an input position at least once (its row was looked up)."""
    return _by_step(ids, vocab, seed, steps, batch_size, seq_len, at, lambda counts: counts > 0)


def _by_step(ids, vocab, seed, steps, batch_size, seq_len, at, per_step):
    """The running sum over steps 1..s of per_step(each id's count in step's input positions), at each s of `at`."""
    from tying.data.batches import train_batch  # here: token-set jobs only read drawn counts and import no torch

    at = sorted({steps} if at is None else set(at))
    if at and (at[0] < 0 or at[-1] > steps):
        raise PipelineError(f"drawn counts asked at steps {at} outside 0..{steps}")
    total, out = np.zeros(vocab, dtype=np.int64), {}
    if 0 in at:
        out[0] = total.copy()
    for step in range(1, steps + 1):
        inputs, _ = train_batch(ids, step, seed, batch_size, seq_len)
        total += per_step(np.bincount(inputs.numpy().ravel(), minlength=vocab))
        if step in at:
            out[step] = total.copy()
    return out


def drawn_frame(by_step, batch_size, seq_len, lookups=None):
    """Tidy drawn counts (step, token_id, drawn, positions, looked_up) from drawn_by_step, ids never drawn left
    out; positions: the input positions trained on by the step (step x batch x length); looked_up: the steps
    that looked each id up, from lookups_by_step at the same steps (`lookups` None: no such column)."""
    frames = [
        pd.DataFrame(
            {
                "step": s,
                "token_id": np.flatnonzero(d),
                "drawn": d[d > 0],
                "positions": s * batch_size * seq_len,
                **({} if lookups is None else {"looked_up": lookups[s][d > 0]}),
            }
        )
        for s, d in sorted(by_step.items())
    ]
    return pd.concat(frames, ignore_index=True)[DRAWN_COLUMNS[:4] + ([] if lookups is None else ["looked_up"])]


def write_drawn(ids, vocab, run, at, path):
    """results/drawn/...: drawn_frame of one run shape (seed, steps, batch_size, seq_len) at steps `at`."""
    seed, steps, batch_size, seq_len = run
    drawn, lookups = (
        count(ids, vocab, seed, steps, batch_size, seq_len, at) for count in (drawn_by_step, lookups_by_step)
    )
    write_parquet(drawn_frame(drawn, batch_size, seq_len, lookups), path)


def drawn_at(frame, step, vocab, column="drawn"):
    """(vocab,) int64 drawn counts (or another `column`: looked_up) of a drawn_frame at `step`, and the positions
    trained on by it."""
    rows = frame[frame["step"] == step]
    if step not in set(frame["step"]):
        raise PipelineError(f"drawn counts have no step {step} (they hold {sorted(set(frame['step']))})")
    drawn = np.zeros(vocab, dtype=np.int64)
    drawn[rows["token_id"].to_numpy()] = rows[column].to_numpy()
    return drawn, int(rows["positions"].iloc[0]) if len(rows) else 0


def token_set_frame(split_counts, drawn, min_count, positions=None, looked_up=None, steps=None):
    """The analysed tokens: drawn at least `min_count` times by every run of a pair.

    split_counts: (V,) training-split occurrences; drawn: (V,) per run, its drawn_by_step count; positions:
    per run, the input positions it trained on; looked_up: (V,) per run, its lookups_by_step count by the
    compared step `steps`. Returns columns token_id, count (training-split occurrences), drawn (the fewest over
    the runs), with positions, per_million (drawn per million positions of the run with the fewest) and
    positions, and with looked_up, looked_up (the fewest over the runs) and lookup_share (looked_up / steps).
    """
    fewest = np.min(np.stack(drawn), axis=0)
    keep = np.flatnonzero(fewest >= min_count)
    if len(keep) < 2:
        raise PipelineError(
            f"only {len(keep)} tokens were drawn at least {min_count} times in training (analysis.min_count)"
        )
    frame = pd.DataFrame({"token_id": keep, "count": split_counts[keep], "drawn": fewest[keep]})
    if positions is not None:
        frame = frame.assign(per_million=fewest[keep] / min(positions) * 1e6, positions=min(positions))
    if looked_up is not None:
        looked = np.min(np.stack(looked_up), axis=0)[keep]
        frame = frame.assign(looked_up=looked, lookup_share=looked / steps)
    return frame


def write_token_set(counts, drawn_frames, step, min_count, path, by_step_path=None):
    """results/token_sets/{pair}/seed{seed}.parquet (plus n_tokens) from the training split's token
    `counts` frame and each of the pair's runs' drawn_frame at the compared `step`; by_step_path: the
    same tokens' fewest drawn count at every step all runs' frames hold (step, token_id, drawn)."""
    vocab = int(counts["token_id"].max()) + 1
    final = [drawn_at(f, step, vocab) for f in drawn_frames]
    looked_up = (
        [drawn_at(f, step, vocab, "looked_up")[0] for f in drawn_frames]
        if all("looked_up" in f.columns for f in drawn_frames)
        else None
    )
    frame = token_set_frame(
        counts_by_id(counts, vocab), [d for d, _ in final], min_count, [p for _, p in final], looked_up, step
    )
    write_parquet(frame.assign(n_tokens=len(frame)), path)
    if by_step_path is not None:
        steps = sorted(set.intersection(*(set(f["step"]) for f in drawn_frames)))
        keep = frame["token_id"].to_numpy()
        rows = [
            pd.DataFrame(
                {
                    "step": s,
                    "token_id": keep,
                    "drawn": np.min([drawn_at(f, s, vocab)[0][keep] for f in drawn_frames], axis=0),
                }
            )
            for s in steps
        ]
        write_parquet(pd.concat(rows, ignore_index=True), by_step_path)


def analysed_tokens(path):
    """Token ids (ascending) of the token set at `path`; None for no path (a released pair keeps
    every real row)."""
    return None if path is None else pd.read_parquet(path, columns=["token_id"])["token_id"].to_numpy()


def seen_by(by_step, step, min_count):
    """Token ids (ascending) of a set by step drawn at least `min_count` times by `step`."""
    rows = by_step[(by_step["step"] == step) & (by_step["drawn"] >= min_count)]
    return np.sort(rows["token_id"].to_numpy())

"""How far and how fast the embedding matrices of one untied run move (Figures 3, 8, 9).

For E_in and E_out separately, over checkpoints s_0 < s_1 < ...:
drift(s) = mean_i cos(E_s[i], E_{s_0}[i]); change(s_k) = mean_i cos(E_{s_k}[i], E_{s_{k-1}}[i]),
NaN at s_0. Cosines of raw (uncentred) rows. The per-token drifts behind the means are kept too (C4 by
exposure, and at each checkpoint on the tokens seen by then).
"""

import math

import numpy as np
import pandas as pd

from tying.errors import PipelineError
from tying.metrics.alignment import row_cosines

MATRICES = ("input", "output")


def evolution_frames(checkpoints, keep=None):
    """Tidy drift and change of E_in and E_out along a run, and each followed token's drift.

    checkpoints: iterable of (step, Embeddings) in increasing step order; a generator that
    loads each on demand keeps only the first, previous and current checkpoints in memory.
    keep: token ids to follow (a trained run's analysed tokens), else every row.
    Returns (frame, per_token): frame with columns matrix ("input", "output"), step, drift, change,
    n_tokens (the rows followed); per_token with columns matrix, step, token_id (keep's ids, else
    the row), drift.
    """
    rows, tokens, first, previous, last_step = [], [], None, None, None
    for step, emb in checkpoints:
        emb = emb if keep is None else emb.select(keep)
        if last_step is not None and step <= last_step:
            raise PipelineError(f"checkpoints must come in increasing step order, got {step} after {last_step}")
        if first is not None and emb.input.shape != first.input.shape:
            raise PipelineError(
                f"step {step}: embedding shape {tuple(emb.input.shape)} differs from {tuple(first.input.shape)}"
            )
        if first is None:
            first = emb
        for name in MATRICES:
            current = getattr(emb, name)
            drift = row_cosines(current, getattr(first, name))
            tokens.append(pd.DataFrame({"matrix": name, "step": step, "drift": drift.numpy()}))
            rows.append(
                {
                    "matrix": name,
                    "step": step,
                    "drift": float(drift.mean()),
                    "change": math.nan
                    if previous is None
                    else float(row_cosines(current, getattr(previous, name)).mean()),
                }
            )
        previous, last_step = emb, step
    if not rows:
        raise PipelineError("evolution needs at least one checkpoint")
    ids = np.arange(first.input.shape[0]) if keep is None else np.asarray(keep)
    per_token = pd.concat([t.assign(token_id=ids) for t in tokens], ignore_index=True)
    frame = pd.DataFrame(rows).sort_values(["matrix", "step"], ignore_index=True).assign(n_tokens=first.input.shape[0])
    return frame, per_token[["matrix", "step", "token_id", "drift"]]

"""How far and how fast the embedding matrices of one untied run move (Figures 3, 8, 9).

For E_in and E_out separately, over checkpoints s_0 < s_1 < ...:
drift(s) = mean_i cos(E_s[i], E_{s_0}[i]); change(s_k) = mean_i cos(E_{s_k}[i], E_{s_{k-1}}[i]),
NaN at s_0. Cosines of raw (uncentred) rows.
"""
import math

import pandas as pd

from tying.alignment import row_cosines
from tying.errors import PipelineError

MATRICES = ("input", "output")


def evolution_frame(checkpoints, keep=None):
    """Tidy drift and change of E_in and E_out along a run.

    checkpoints: iterable of (step, Embeddings) in increasing step order; a generator that
    loads each on demand keeps only the first, previous and current checkpoints in memory.
    keep: token ids to follow (a trained run's analysed tokens), else every row.
    Returns columns matrix ("input", "output"), step, drift, change, n_tokens (the rows followed).
    """
    rows, first, previous, last_step = [], None, None, None
    for step, emb in checkpoints:
        emb = emb if keep is None else emb.select(keep)
        if last_step is not None and step <= last_step:
            raise PipelineError(f"checkpoints must come in increasing step order, got {step} after {last_step}")
        if first is not None and emb.input.shape != first.input.shape:
            raise PipelineError(f"step {step}: embedding shape {tuple(emb.input.shape)} differs from {tuple(first.input.shape)}")
        if first is None:
            first = emb
        for name in MATRICES:
            current = getattr(emb, name)
            rows.append({
                "matrix": name,
                "step": step,
                "drift": float(row_cosines(current, getattr(first, name)).mean()),
                "change": math.nan if previous is None else float(row_cosines(current, getattr(previous, name)).mean()),
            })
        previous, last_step = emb, step
    if not rows:
        raise PipelineError("evolution needs at least one checkpoint")
    return pd.DataFrame(rows).sort_values(["matrix", "step"], ignore_index=True).assign(n_tokens=first.input.shape[0])

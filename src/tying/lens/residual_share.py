"""The embedding's share of the residual stream: how much of each state the lens reads is still the embedding.

Per state s of a model with L blocks, over the tokens of the held-out windows the lens scores
(`tying.lens.scoring.window_starts`): the mean of ||h_0|| / ||h_s|| and the mean cosine of h_s with h_0, h_0
the embedding output and h_s the residual stream after block s. The states are those `tying.lens.unembed`
gives the lens: state L is the last block's output BEFORE the final norm, not transformers' (normed) last
hidden state. State 0 is 1 and 1 by definition; a ratio that stays near 1 with a cosine near 1 is a stream the
embedding still dominates, where a readout of it is close to a readout of the embedding.
"""

import pandas as pd
import torch

from tying.lens.scoring import window_starts
from tying.lens.unembed import stacked_states, token_windows


def share_sums(states):
    """Sums over tokens of ||h_0|| / ||h_s|| and of cos(h_s, h_0): (L + 1, N, d) -> two (L + 1,) float64
    tensors (a token whose h_s or h_0 is zero contributes NaN)."""
    states = states.double()
    norms = torch.linalg.vector_norm(states, dim=-1)  # (L + 1, N)
    ratio = norms[0] / norms
    cosine = torch.linalg.vecdot(states, states[0]) / (norms * norms[0])
    return ratio.sum(-1), cosine.sum(-1)


@torch.no_grad()
def residual_share(model, tokens, *, seq_len, batch_size, batches=None):
    """The residual share of `model` on the held-out windows of `tokens` (window_starts' windows, a batch at a
    time). Returns a tidy frame: layer (0..L), norm_ratio (mean ||h_0|| / ||h_s||), cosine (mean cos(h_s, h_0)),
    n_tokens."""
    starts = window_starts(model, tokens, seq_len, batch_size, batches)
    ratio = cosine = 0
    for i in range(0, len(starts), batch_size):
        states = stacked_states(model, token_windows(tokens, starts[i : i + batch_size], seq_len, model.device))
        r, c = share_sums(states)
        ratio, cosine = ratio + r, cosine + c
    n = len(starts) * seq_len
    return pd.DataFrame(
        {"layer": range(len(ratio)), "norm_ratio": (ratio / n).tolist(), "cosine": (cosine / n).tolist(), "n_tokens": n}
    )

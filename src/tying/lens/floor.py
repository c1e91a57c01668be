"""The floor under every lens at the embedding state.

State 0 of a model without learned position embeddings (OLMo, GPT-NeoX: rotary) is a function of the current
token alone, so any lens there predicts one distribution per token id. On a set of positions the best such
prediction is the model's mean output over the positions holding that token, pbar_v, and no lens at state 0
can score below

    floor = mean over positions t of KL(p_t || pbar_{x_t})

on the same positions. The sums need one pass: with S_v = sum of p_t over the positions holding v,
floor = (sum_t sum p_t log p_t - sum_v S_v . log pbar_v) / N.
"""
import math

import torch

from tying.lens.scoring import target, window_starts
from tying.lens.unembed import token_windows


@torch.no_grad()
def state0_floor(model, tokens, *, seq_len, batch_size, batches=None):
    """The state-0 floor in bits over the held-out windows a lens is scored on (`window_starts`).

    Keeps a V x V float64 sum of distributions, one row per token id: meant for the vocabularies of the
    models this pipeline trains."""
    starts = window_starts(model, tokens, seq_len, batch_size, batches)
    vocab = model.get_output_embeddings().weight.shape[0]
    sums = torch.zeros(vocab, vocab, dtype=torch.float64, device=model.device)
    neg_entropy, positions = 0.0, 0
    for i in range(0, len(starts), batch_size):
        ids = token_windows(tokens, starts[i : i + batch_size], seq_len, model.device)
        p, p_log_p = target(model(input_ids=ids, use_cache=False).logits)
        sums.index_add_(0, ids.reshape(-1), p.double())
        neg_entropy, positions = neg_entropy + p_log_p.double().sum().item(), positions + len(p)
    mean = sums / sums.sum(-1, keepdim=True).clamp_min(1e-300)
    cross = torch.xlogy(sums, mean).sum().item()
    return (neg_entropy - cross) / positions / math.log(2)

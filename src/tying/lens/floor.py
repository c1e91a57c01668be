"""The floors under every lens at the embedding state.

State 0 of a model without learned position embeddings (OLMo, GPT-NeoX: rotary) is a function of the current
token alone, so any lens there predicts one distribution per token id. On a set of positions the best such
prediction is the model's mean output over the positions holding that token, pbar_v, and no lens at state 0
can score below

    floor = mean over positions t of KL(p_t || pbar_{x_t})

on the same positions. The sums need one pass: with S_v = sum of p_t over the positions holding v,
floor = (sum_t sum p_t log p_t - sum_v S_v . log pbar_v) / N.

A lens also reads its prediction through the model's readout (final norm, then unembedding: a
`tying.lens.unembed.Readout`), which may not express pbar_v itself: the mean KL of a lens at state 0 is
exactly the floor plus the positions' mean KL(pbar_{x_t} || q_{x_t}), q_v the lens's prediction for token v.
The readout floor is the least that second term can be over every vector the readout could read,

    readout floor = sum_v (n_v / N) min_z KL(pbar_v || softmax(W norm(z) + b)),

n_v the positions holding v; so no lens at state 0 scores below floor + readout floor, and a lens's state-0 KL
splits into what the token alone leaves (floor), what the readout cannot express (readout floor) and what the
lens leaves of the rest.
"""

import math

import torch

from tying.lens.scoring import target, window_starts
from tying.lens.unembed import token_windows

FLOOR_VOCAB = 8192  # the floors keep a V x V float64 sum (512 MiB here); larger vocabularies get no floor (NaN)
READOUT_STEPS = 100  # LBFGS iterations of the readout floor's search (a default-build model's: within 2e-6 bits of 400)
READOUT_CHUNK = 1024  # tokens searched at once


@torch.no_grad()
def token_means(model, tokens, *, seq_len, batch_size, batches=None):
    """The model's mean output per token id over the held-out windows a lens is scored on (`window_starts`):
    -> (pbar (n, V) float64, counts (n,) positions holding each, floor in bits), n the token ids present.

    Keeps a V x V float64 sum of distributions, one row per token id: meant for the vocabularies of the
    models this pipeline trains."""
    starts = window_starts(model, tokens, seq_len, batch_size, batches)
    vocab = model.get_output_embeddings().weight.shape[0]
    sums = torch.zeros(vocab, vocab, dtype=torch.float64, device=model.device)
    counts = torch.zeros(vocab, dtype=torch.float64, device=model.device)
    neg_entropy, positions = 0.0, 0
    for i in range(0, len(starts), batch_size):
        ids = token_windows(tokens, starts[i : i + batch_size], seq_len, model.device).reshape(-1)
        p, p_log_p = target(model(input_ids=ids.view(-1, seq_len), use_cache=False).logits)
        sums.index_add_(0, ids, p.double())
        counts.index_add_(0, ids, torch.ones_like(ids, dtype=torch.float64))
        neg_entropy, positions = neg_entropy + p_log_p.double().sum().item(), positions + len(p)
    present = counts > 0
    mean = sums[present] / sums[present].sum(-1, keepdim=True)
    cross = torch.xlogy(sums[present], mean).sum().item()
    return mean, counts[present], (neg_entropy - cross) / positions / math.log(2)


def state0_floor(model, tokens, *, seq_len, batch_size, batches=None):
    """The state-0 floor in bits over the held-out windows a lens is scored on (`token_means`)."""
    return token_means(model, tokens, seq_len=seq_len, batch_size=batch_size, batches=batches)[2]


def state0_floors(model, readout, tokens, *, seq_len, batch_size, batches=None):
    """{"floor_bits", "readout_floor_bits"} of `model` on the windows a lens is scored on; both NaN where the
    vocabulary is larger than FLOOR_VOCAB."""
    if model.get_output_embeddings().weight.shape[0] > FLOOR_VOCAB:
        return {"floor_bits": math.nan, "readout_floor_bits": math.nan}
    pbar, counts, floor = token_means(model, tokens, seq_len=seq_len, batch_size=batch_size, batches=batches)
    return {"floor_bits": floor, "readout_floor_bits": readout_floor(readout, pbar, counts)}


def readout_floor(readout, pbar, counts, steps=READOUT_STEPS):
    """The readout floor in bits (module docstring): per row v of `pbar` (n, V), min over z of KL(pbar_v ||
    softmax(readout.logits(readout.norm(z)))), weighted by `counts` (n,).

    readout: a `tying.lens.unembed.Readout` (or any object with its norm and logits). Each chunk of
    READOUT_CHUNK tokens is one LBFGS search (strong Wolfe line search, `steps` iterations; the rows are
    independent, so their sum's minimum is each row's) in the readout's dtype, from the least-squares
    solution of logits = log pbar_v without the norm (`readout_start`): deterministic for given inputs."""
    total = 0.0
    for lo in range(0, len(pbar), READOUT_CHUNK):
        target, weight = pbar[lo : lo + READOUT_CHUNK], counts[lo : lo + READOUT_CHUNK]
        z = readout_start(readout, target).requires_grad_(True)
        p = target.to(z.dtype)
        neg_entropy = torch.special.xlogy(p, p).sum(-1)

        def kl():
            q = torch.log_softmax(readout.logits(readout.norm(z)), -1)
            return neg_entropy - (p * q).sum(-1)

        opt = torch.optim.LBFGS(
            [z], max_iter=steps, line_search_fn="strong_wolfe", tolerance_grad=1e-10, tolerance_change=1e-14
        )

        def closure():
            opt.zero_grad()
            loss = kl().sum()
            loss.backward()
            return loss

        with torch.enable_grad():
            opt.step(closure)
        with torch.no_grad():
            total += float((kl().clamp_min(0).double() * weight).sum())
    return total / float(counts.sum()) / math.log(2)


@torch.no_grad()
def readout_start(readout, pbar):
    """Where the readout floor's search starts, per row of `pbar`: the least-squares z with scale x (W z + b) =
    log pbar up to a constant (pbar clamped at 1e-30), the final norm and any soft cap ignored; in the readout
    weight's dtype."""
    weight = readout.weight.double()
    logits = torch.log(pbar.double().clamp_min(1e-30)) / readout.scale
    if readout.bias is not None:
        logits = logits - readout.bias.double()
    centred = logits - logits.mean(-1, keepdim=True)
    w = weight - weight.mean(0, keepdim=True)  # a constant added to every logit changes nothing
    return torch.linalg.lstsq(w, centred.T).solution.T.to(readout.weight.dtype)

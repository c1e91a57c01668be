"""Held-out scoring of a tuned lens: KL(p_model || p_lens) per token in bits, per state, per window.

Every non-overlapping validation window is scored unless `batches` limits them; `window_kl` keeps each
window's mean, so C3's interval can bootstrap over windows (tying.lens.certificate). Logits are formed a
chunk of tokens at a time (CHUNK_BYTES), so a chunk's logits stay in cache.
"""

import math

import numpy as np
import pandas as pd
import torch

from tying.lens.unembed import Readout, check_tokens, stacked_states, token_windows

CHUNK_BYTES = {"cpu": 4 << 20, "cuda": 1 << 30}  # float32 logits formed at once, per device type


def target_probabilities(logits):
    """softmax over the vocabulary in float32: (..., V) -> (N, V)."""
    return logits.reshape(-1, logits.shape[-1]).float().softmax(-1)


def target(logits):
    """Target probabilities and their sum p log p: (..., V) -> ((N, V), (N,)), float32."""
    p = target_probabilities(logits)
    return p, torch.special.xlogy(p, p).sum(-1)


def kl_from_target(target, lens_logits):
    """Per-token KL in bits from a `target` and lens logits: (..., V) -> (...).

    KL(p || softmax(q)) = sum p log p - p.q + logsumexp(q) per row, clamped at 0.
    """
    p, neg_entropy = target
    q = lens_logits.reshape(p.shape).float()
    kl = (neg_entropy - torch.linalg.vecdot(p, q) + q.logsumexp(-1)).clamp_min(0)
    return (kl / math.log(2)).reshape(lens_logits.shape[:-1])


@torch.no_grad()
def token_kl(lenses, readout, states, *, logit=True, chunk_bytes=None):
    """Per-token KL(p_L || q) in bits of each tuned lens at its states and, with `logit`, of the logit
    lens at states 0..L-1: -> ([(len(states_i), N) per lens], logit (L, N) or None).

    lenses: [(TunedLens, the states it reads, None for all of 0..L-1)]; states: (L + 1, N, d) as for
    `backward_lens`. Per chunk of tokens the logits of every state read are formed together (one
    product), log-softmaxed in place, and each KL is p_L . (log p_L - log q), clamped at 0. (State L's
    KL is 0 by construction, in both lenses.)
    """
    n, n_tokens = len(states) - 1, states.shape[1]
    reads = [(lens, list(range(n)) if layers is None else list(layers)) for lens, layers in lenses]
    index = [torch.tensor(layers, dtype=torch.long, device=states.device) for _, layers in reads]
    sizes = [len(layers) for _, layers in reads] + [n] * logit
    step = chunk_tokens(sum(sizes) + 1, readout.weight, chunk_bytes)
    out = torch.empty(sum(sizes), n_tokens, device=states.device)
    for lo in range(0, n_tokens, step):
        hi = min(n_tokens, lo + step)
        translated = [lens.translate(states[i, lo:hi], i).to(states.dtype) for (lens, _), i in zip(reads, index)]
        rows = torch.cat([*translated, *([states[:n, lo:hi]] if logit else []), states[n:, lo:hi]])
        log_q = readout.logits(readout.norm(rows).reshape(-1, rows.shape[-1]))  # one product
        torch.log_softmax(log_q, -1, out=log_q)
        log_q = log_q.view(len(rows), hi - lo, -1)  # (rows, c, V), the last the target's
        p = log_q[-1].exp()
        cross = torch.linalg.vecdot(log_q, p)  # p . log q per state and token (einsum: 7x slower)
        out[:, lo:hi] = (cross[-1:] - cross[:-1]).clamp_min_(0) / math.log(2)
    parts = list(out.split(sizes)) if sizes else []
    return parts[: len(reads)], (parts[-1] if logit else None)


def early_states(n_blocks):
    """C3's early states of a model with n_blocks blocks: 0 .. ceil(L/2) - 1
    (`tying.claims.statistics.early_layer_gap`)."""
    return list(range(math.ceil(n_blocks / 2)))


def convergence(budget, reference):
    """Held-out tuned-lens KL per state of the budget's lens against a reference lens (a longer budget).

    budget, reference: `evaluate_lens` frames on the same held-out windows. Returns layer, kl_budget_bits,
    kl_bits (the reference's), change_bits (reference minus budget); the budget has converged to a
    tolerance when every state's |change_bits| is within it.
    """
    kl = [f[f["lens"] == "tuned"].set_index("layer")["kl_bits"] for f in (budget, reference)]
    out = pd.DataFrame({"kl_budget_bits": kl[0], "kl_bits": kl[1]})
    return out.assign(change_bits=out["kl_bits"] - out["kl_budget_bits"]).reset_index()


@torch.no_grad()
def window_kl(model, lens, tokens, *, seq_len, batch_size, batches=None, logit=True, more=None, chunk_bytes=None):
    """Mean KL per token (bits) in each held-out window, of the tuned lens at every state and, with
    `logit`, of the logit lens at every state 0..L.

    Windows are the consecutive non-overlapping seq_len windows from the start of `tokens`, all of
    them, or the first `batches` batches of batch_size. more: {name: (TunedLens, states)} scored in
    the same pass (one model forward per batch), at those states only. Returns a tidy frame: window
    (int), layer, lens ("tuned", "logit" or a name of `more`), kl_bits.
    """

    starts = window_starts(model, tokens, seq_len, batch_size, batches)
    n, readout = model.config.num_hidden_layers, Readout(model)
    names = ["tuned", *(more or {})]
    lenses = [(lens, None), *[(m, [s for s in layers if s < n]) for m, layers in (more or {}).values()]]
    kl = {name: [] for name in [*names, "logit"]}
    for i in range(0, len(starts), batch_size):
        batch = starts[i : i + batch_size]
        states = stacked_states(model, token_windows(tokens, batch, seq_len, model.device))
        tuned, lg = token_kl(lenses, readout, states, logit=logit, chunk_bytes=chunk_bytes)
        for name, values in zip(names, tuned):
            kl[name].append(values.reshape(len(values), len(batch), seq_len).mean(-1))
        if logit:
            kl["logit"].append(lg.reshape(n, len(batch), seq_len).mean(-1))
    layers = [list(range(n)), *[lay for _, lay in lenses[1:]]]
    frames = [_window_frame(torch.cat(kl[name], 1), lay, name, n, name == "tuned") for name, lay in zip(names, layers)]
    if logit:
        frames.append(_window_frame(torch.cat(kl["logit"], 1), list(range(n)), "logit", n, True))
    return pd.concat(frames, ignore_index=True)


def scoring_args(cfg):
    """window_kl's window arguments from a config's `lens:` section (eval_batches null or absent: every window)."""
    return {"seq_len": cfg["seq_len"], "batch_size": cfg["batch_size"], "batches": cfg.get("eval_batches")}


def window_starts(model, tokens, seq_len, batch_size, batches=None):
    """Starts of the held-out windows a lens is scored on: the consecutive non-overlapping seq_len windows of
    `tokens`, all of them or the first `batches` batches of batch_size (the tokens checked against the model)."""
    check_tokens(model, tokens, seq_len)
    starts = np.arange(0, len(tokens) - seq_len + 1, seq_len)
    return starts if batches is None else starts[: batches * batch_size]


def state_means(windows):
    """`window_kl`'s frame as mean KL per state over its windows (equal-length windows: per token):
    layer, lens, kl_bits, n_windows."""
    out = windows.groupby(["lens", "layer"])["kl_bits"].agg(["mean", "size"]).reset_index()
    out = out.rename(columns={"mean": "kl_bits", "size": "n_windows"})
    return out.sort_values(["lens", "layer"], ignore_index=True)


def evaluate_lens(model, lens, tokens, *, seq_len, batch_size, batches=None):
    """Mean KL per token (bits) of the tuned and the logit lens at every state 0..L, over the held-out
    windows `window_kl` reads. Returns a tidy frame: layer (int), lens ("tuned"/"logit"), kl_bits
    (float), n_windows."""
    return state_means(window_kl(model, lens, tokens, seq_len=seq_len, batch_size=batch_size, batches=batches))


def _window_frame(kl, layers, name, n_blocks, with_last):
    """(len(layers), W) per-window KL -> tidy rows; with_last adds state L (KL 0: the model's own logits)."""
    values = kl.cpu().numpy()
    frame = pd.DataFrame(
        {
            "window": np.tile(np.arange(values.shape[1]), len(layers)),
            "layer": np.repeat(layers, values.shape[1]),
            "lens": name,
            "kl_bits": values.reshape(-1).astype(float),
        }
    )
    if with_last:
        frame = pd.concat(
            [
                frame,
                pd.DataFrame({"window": np.arange(values.shape[1]), "layer": n_blocks, "lens": name, "kl_bits": 0.0}),
            ],
            ignore_index=True,
        )
    return frame


def chunk_tokens(rows_per_token, weight, chunk_bytes):
    """Tokens per chunk so that `rows_per_token` float32 logits rows of each stay within chunk_bytes
    (default CHUNK_BYTES of the weight's device type)."""
    budget = CHUNK_BYTES.get(weight.device.type, CHUNK_BYTES["cuda"]) if chunk_bytes is None else chunk_bytes
    return max(1, budget // (rows_per_token * len(weight) * 4))

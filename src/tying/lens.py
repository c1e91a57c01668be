"""Tuned lens: per-state affine translators read through the model's frozen readout.

For a model with L blocks, states 0..L are indexed as in `tying.unembed` (0 = embedding
output, l = output of block l). State l < L has its own translator h -> h + A_l h + b_l
(A_l, b_l start at zero, so an untrained lens is the logit lens); state L is read as is,
which reproduces the model's logits (KL 0). All translators are trained together to
minimise KL(p_final || p_lens); results are mean KL per token in bits.

Training follows `tuned-lens` 0.2 (`tuned_lens/scripts/train_loop.py`, `ingredients.Optimizer`):
the loss is the sum over states of the mean KL in nats, the gradient's global norm over all
translators is clipped at 1.0, and its default optimizer is SGD with Nesterov momentum 0.9,
weight decay 1e-3 and a learning rate given as the momentum-corrected step (the torch lr is
lr * (1 - momentum); tuned-lens's default lr is 1.0), decayed linearly to 0 with no warmup.
Its Adam alternative (amsgrad, betas (momentum, 0.999), no warmup: v0.2's Adam warmup default
never applies, its test compares the option enum with a string) is `optimizer="adam"`.
What differs: the budget (tuned-lens: 250 steps of 2^18 tokens), the windows (drawn at random
from a flat token array rather than a shuffled chunked dataset) and the precision (float32
translators and loss here; tuned-lens runs the translators under bfloat16 autocast).
"""
import math
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from safetensors.torch import load_file, save_file

from tying.errors import PipelineError
from tying.io import atomic_path
from tying.tokens import load_ids


class TunedLens(torch.nn.Module):
    """Affine translators for states 0..n_states-1 of width d; later states pass unchanged."""

    def __init__(self, n_states, d):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(n_states, d, d))
        self.bias = torch.nn.Parameter(torch.zeros(n_states, d))

    def forward(self, h, state):
        """Translate state `state`: (..., d) -> (..., d), computed in float32, returned in h's dtype."""
        if state >= len(self.weight):
            return h
        x = h.float()
        return (x + torch.nn.functional.linear(x, self.weight[state], self.bias[state])).to(h.dtype)


def kl_bits(target_logits, lens_logits):
    """Per-token KL(p_target || p_lens) in bits. (..., V), (..., V) -> (...)."""
    return _kl_bits(_target(target_logits), lens_logits)


def target_probabilities(logits):
    """softmax over the vocabulary in float32: (..., V) -> (N, V)."""
    return logits.reshape(-1, logits.shape[-1]).float().softmax(-1)


def _target(logits):
    """Target probabilities and their sum p log p: (..., V) -> ((N, V), (N,)), float32."""
    p = target_probabilities(logits)
    return p, torch.special.xlogy(p, p).sum(-1)


def _kl_bits(target, lens_logits):
    """Per-token KL in bits from a `_target` and lens logits: (..., V) -> (...).

    KL(p || softmax(q)) = sum p log p - p.q + logsumexp(q) per row, clamped at 0.
    """
    p, neg_entropy = target
    q = lens_logits.reshape(p.shape).float()
    kl = (neg_entropy - torch.linalg.vecdot(p, q) + q.logsumexp(-1)).clamp_min(0)
    return (kl / math.log(2)).reshape(lens_logits.shape[:-1])


def backward_mean_kl(p, lens_logits):
    """Backpropagate the mean per-token KL(p || softmax(q)) in nats from lens logits q (..., V).

    Its gradient, (softmax(q) - p) / N, is all the lens's training needs: the KL's value
    (two more passes over (N, V), and p log p for the target) is never formed.
    """
    q = lens_logits.reshape(p.shape).float()
    grad = q.softmax(-1).sub_(p).div_(len(p))
    lens_logits.backward(grad.reshape(lens_logits.shape).to(lens_logits.dtype))


def lens_optimizer(params, *, optimizer, lr, momentum, weight_decay):
    """tuned-lens's optimizers: "sgd" (Nesterov, torch lr = lr * (1 - momentum)) or "adam" (amsgrad)."""
    if optimizer == "sgd":
        return torch.optim.SGD(params, lr=lr * (1 - momentum), momentum=momentum, nesterov=True,
                               weight_decay=weight_decay)
    if optimizer == "adam":
        return torch.optim.Adam(params, lr=lr, betas=(momentum, 0.999), amsgrad=True, weight_decay=weight_decay)
    raise PipelineError(f"unknown lens optimizer {optimizer!r} (sgd or adam)")


def train_lens(model, tokens, *, seq_len, steps, batch_size, lr, optimizer="sgd", momentum=0.9, weight_decay=1e-3,
               grad_clip=1.0, seed=0):
    """Fit a tuned lens to a frozen causal LM on windows drawn at random from `tokens`.

    tokens: flat token ids (np.ndarray or memmap); each step reads batch_size windows of
    seq_len tokens, drawn by a generator seeded with `seed`. The recipe is tuned-lens's (see
    the module docstring): `lens_optimizer`, lr decayed linearly to 0, gradient norm clipped
    at `grad_clip` (None: not clipped). One backward pass per state keeps only one state's
    logits in memory at a time. Returns the lens on the model's device, in eval mode.
    """
    from tying.unembed import readout, residual_states  # here: importing tying.lens stays free of transformers
    n_blocks, device = model.config.num_hidden_layers, model.device
    lens = TunedLens(n_blocks, model.config.hidden_size).to(device)
    opt = lens_optimizer(lens.parameters(), optimizer=optimizer, lr=lr, momentum=momentum, weight_decay=weight_decay)
    schedule = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1 - step / max(steps, 1))
    rng = np.random.default_rng(seed)
    _check_tokens(model, tokens, seq_len)
    for _ in range(steps):
        starts = rng.integers(0, len(tokens) - seq_len + 1, size=batch_size)
        states, logits = residual_states(model, _windows(tokens, starts, seq_len, device))
        p = target_probabilities(logits)
        opt.zero_grad(set_to_none=True)
        for state in range(n_blocks):
            backward_mean_kl(p, readout(model, lens(states[state], state)))
        if grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(lens.parameters(), grad_clip)
        opt.step()
        schedule.step()
    return lens.eval()


RECIPE = ("optimizer", "lr", "momentum", "weight_decay", "grad_clip")


def recipe(cfg):
    """train_lens's keyword arguments from a config's `lens:` section (steps, batch_size, seq_len, RECIPE)."""
    return {key: cfg[key] for key in ("steps", "batch_size", "seq_len", *RECIPE)}


def load_job(files, cfg):
    """A lens job's frozen model, placed by `lens_placement` from the config's lens.device and lens.dtype,
    and its train and val token arrays: `files` maps model, train, val and meta to paths."""
    from tying.unembed import frozen_model, lens_placement

    device, dtype = lens_placement(cfg["device"], cfg["dtype"])
    return (frozen_model(files["model"], device=device, dtype=dtype), load_ids(files["train"], files["meta"]),
            load_ids(files["val"], files["meta"]))


def fit_and_evaluate(model, train, val, cfg, *, seed, steps=None):
    """Train a lens on `train` with the config's `lens:` recipe (`steps` overrides lens.steps) and
    evaluate it on `val`: (lens, `evaluate_lens` frame)."""
    lens = train_lens(model, train, **{**recipe(cfg), **({} if steps is None else {"steps": steps})}, seed=seed)
    return lens, evaluate_lens(model, lens, val, seq_len=cfg["seq_len"], batch_size=cfg["batch_size"],
                               batches=cfg["eval_batches"])


def convergence(half, full):
    """Tuned-lens KL per state of a lens trained for half the steps against one trained for all.

    half, full: `evaluate_lens` frames on the same held-out windows. Returns layer, kl_half_bits,
    kl_bits, change_bits (full minus half); the budget has converged to a tolerance when every
    state's |change_bits| is within it.
    """
    kl = [f[f["lens"] == "tuned"].set_index("layer")["kl_bits"] for f in (half, full)]
    out = pd.DataFrame({"kl_half_bits": kl[0], "kl_bits": kl[1]})
    return out.assign(change_bits=out["kl_bits"] - out["kl_half_bits"]).reset_index()


@torch.no_grad()
def evaluate_lens(model, lens, tokens, *, seq_len, batch_size, batches):
    """Mean KL per token (bits) of the tuned and the logit lens at every state 0..L.

    Reads up to `batches` batches of consecutive non-overlapping windows from the start
    of `tokens`. Returns a tidy frame: layer (int), lens ("tuned"/"logit"), kl_bits (float).
    """
    from tying.unembed import readout, residual_states

    _check_tokens(model, tokens, seq_len)
    starts = np.arange(0, len(tokens) - seq_len + 1, seq_len)[: batches * batch_size]
    totals = {}
    for i in range(0, len(starts), batch_size):
        states, logits = residual_states(model, _windows(tokens, starts[i : i + batch_size], seq_len, model.device))
        target = _target(logits)
        for layer, h in enumerate(states):
            for name, read in (("tuned", lens(h, layer)), ("logit", h)):
                kl = _kl_bits(target, readout(model, read)).sum().item()
                totals[layer, name] = totals.get((layer, name), 0.0) + kl
    n_tokens = len(starts) * seq_len
    rows = [{"layer": layer, "lens": name, "kl_bits": total / n_tokens} for (layer, name), total in totals.items()]
    return pd.DataFrame(rows).sort_values(["lens", "layer"], ignore_index=True)


def save_lens(lens, path):
    """Write the translators as safetensors (weight (n, d, d), bias (n, d)), atomically."""
    with atomic_path(path) as tmp:
        save_file({k: v.detach().float().cpu().contiguous() for k, v in lens.state_dict().items()}, tmp)


def load_lens(path, device="cpu"):
    """Read a lens written by `save_lens`."""
    if not Path(path).is_file():
        raise PipelineError(f"lens weights not found: {path}")
    tensors = load_file(path, device=str(device))
    lens = TunedLens(*tensors["bias"].shape).to(device)
    lens.load_state_dict(tensors)
    return lens.eval()


def _check_tokens(model, tokens, seq_len):
    if len(tokens) < seq_len:
        raise PipelineError(f"lens needs at least {seq_len} tokens, got {len(tokens)}")
    vocab = model.get_input_embeddings().num_embeddings
    if int(tokens.max()) >= vocab:
        raise PipelineError(f"token id {int(tokens.max())} is outside the model's vocabulary of {vocab}")


def _windows(tokens, starts, seq_len, device):
    """Token windows tokens[s : s + seq_len] for each start: -> (len(starts), seq_len) int64."""
    return torch.from_numpy(np.stack([np.asarray(tokens[s : s + seq_len], dtype=np.int64) for s in starts])).to(device)

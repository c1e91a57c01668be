"""Tuned lens: per-state affine translators read through the model's frozen readout.

For a model with L blocks, states 0..L are indexed as in `tying.unembed` (0 = embedding
output, l = output of block l). State l < L has its own translator h -> h + A_l h + b_l; state L
is read as is, which reproduces the model's logits (KL 0). All translators are trained together
to minimise KL(p_final || p_lens); results are mean KL per token in bits, scored on every
non-overlapping validation window unless `batches` limits them (`window_kl` keeps each window's mean).

Training follows `tuned-lens` 0.2 (`tuned_lens/scripts/train_loop.py`, `ingredients.Optimizer`):
the loss is the sum over states of the mean KL in nats, the gradient's global norm over all
translators is clipped at 1.0, and its default optimizer is SGD with Nesterov momentum 0.9,
weight decay 1e-3 and a learning rate given as the momentum-corrected step (the torch lr is
lr * (1 - momentum); tuned-lens's default lr is 1.0), decayed linearly to 0 with no warmup.
Its Adam alternative (amsgrad, betas (momentum, 0.999), no warmup: v0.2's Adam warmup default
never applies, its test compares the option enum with a string) is `optimizer="adam"`.
What differs: the budget (tuned-lens: 250 steps of 2^18 tokens), the schedule (`lens_schedule`: the
linear decay reaches 0 at CHECK_FRACTION of the steps, so the lens there, which the lens job's
convergence check compares the end with, is annealed; the rest restarts at RESTART of the peak and
decays to 0 again), the windows (drawn at random from a flat token array rather than a shuffled
chunked dataset), the precision (float32
translators, softmax and loss here, and float32 scoring; tuned-lens runs the translators under bfloat16
autocast; `train_dtype` runs a training step's readout products in bfloat16 or float32) and, with
`whiten=True`, the coordinates the optimiser works in: translator l as h + C_l S_l (h - mu_l) + c_l,
S_l the inverse square root of state l's covariance (from one pass over FIT_WINDOWS windows). The
start is still zero (the logit lens); Adam's per-parameter steps no longer fight the states'
correlated, unequal directions, and the weight decay, on C_l = A_l Cov_l^(1/2), penalises what the
translator does to the data (E |A_l (h - mu_l)|^2) rather than A_l's raw entries. `fisher=True`
whitens the output side too, as K-FAC's two factors do: translator l as h + P_l (C_l S_l (h - mu_l)
+ c_l), P_l the inverse square root of the readout's Fisher at state l (`readout_fisher`, damped), so
directions the readout barely responds to are no longer learnt at the pace of those it amplifies
(benchmarks/lens_convergence.py: input whitening alone lowers the held-out KL at every state in a
fraction of the steps; with the output side, states past the embedding reach a lower KL at 500 steps
than input whitening alone at 2,000). A closed-form least-squares start (each state's affine fit of the
final state) was tried and dropped: it reaches the embedding state's optimum far more slowly than zero.

A step's cost is its readout, every state's logits over the full vocabulary. `backward_lens` forms
them for all states together, a chunk of tokens at a time (a chunk's logits stay in cache), turns
them into softmax(q) - p in place, and backpropagates through the frozen unembedding by hand, one
product back to the normed states (autograd only from there, through the final norm and the
translators): 2L + 1 products of (tokens x d) by (d x V) a step, the bound benchmarks/lens_speed.py
measures the step against.
"""
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from safetensors.torch import load_file, save_file

from tying.errors import PipelineError
from tying.io import atomic_path
from tying.tokens import load_ids

FIT_WINDOWS = 256  # windows (of the training tokens) whose states' covariance the whitening comes from
CHUNK_BYTES = {"cpu": 4 << 20, "cuda": 1 << 30}  # float32 logits formed at once, per device type
CHECK_FRACTION = 0.75  # the lens job's own convergence check: held-out C3 at this fraction of the budget
RESTART = 0.25  # the learning rate of the steps after the check, at their start, as a fraction of the peak
REFERENCE_FACTOR = 4  # the reference lens (lens_convergence) trains for this many times lens.steps
FISHER_DAMPING = 0.01  # added to the readout's Fisher, scaled to largest eigenvalue 1: P_l's eigenvalues lie in [1, 10]


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

    def translate(self, states, index=None):
        """Translate states 0..n-1 (n = n_states), or the states `index` lists, together: (k, N, d) ->
        (k, N, d) float32."""
        x = states.float()
        weight, bias = (self.weight, self.bias) if index is None else (self.weight[index], self.bias[index])
        return x + torch.baddbmm(bias.unsqueeze(1), x, weight.transpose(1, 2))


class WhitenedLens(TunedLens):
    """A tuned lens trained in whitened coordinates: translator l is h -> h + P_l (C_l S_l (h - mu_l) + c_l),
    with mu_l and S_l = Cov_l^(-1/2) the state's mean and inverse square-root covariance and P_l an output-side
    factor (identity unless given; `whitened_lens` with `fisher`), all fixed buffers, so the optimiser sees
    uncorrelated, unit-variance inputs. `plain()` is the same lens as a TunedLens (A_l = P_l C_l S_l,
    b_l = P_l c_l - A_l mu_l)."""

    def __init__(self, mean, whiten, output=None):
        super().__init__(*mean.shape)
        self.register_buffer("mean", mean)
        self.register_buffer("whiten", whiten)
        self.register_buffer("output", torch.eye(mean.shape[1], dtype=whiten.dtype, device=whiten.device).expand_as(
            whiten).clone() if output is None else output)

    def effective(self, index=None):
        """(A, b) of the translators (all, or those `index` lists), with autograd."""
        weight, bias, mean, whiten, output = (self.weight, self.bias, self.mean, self.whiten, self.output) \
            if index is None else (self.weight[index], self.bias[index], self.mean[index], self.whiten[index],
                                   self.output[index])
        a = output @ weight @ whiten
        return a, (output @ bias.unsqueeze(-1)).squeeze(-1) - (a @ mean.unsqueeze(-1)).squeeze(-1)

    def forward(self, h, state):
        if state >= len(self.weight):
            return h
        a, b = self.effective([state])
        x = h.float()
        return (x + torch.nn.functional.linear(x, a[0], b[0])).to(h.dtype)

    def translate(self, states, index=None):
        x, (a, b) = states.float(), self.effective(index)
        return x + torch.baddbmm(b.unsqueeze(1), x, a.transpose(1, 2))

    @torch.no_grad()
    def plain(self):
        a, b = self.effective()
        lens = TunedLens(*b.shape).to(b.device)
        lens.weight.copy_(a)
        lens.bias.copy_(b)
        return lens.eval()


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


def backward_lens(lens, readout, states, chunk_bytes=None):
    """Backpropagate the lens loss, the sum over states l < L of the mean KL(p_L || q_l) in nats,
    into the translators' gradients: what `backward_mean_kl` per state gives, in 2L + 1 products.

    states: (L + 1, N, d), the model's states 0..L (`tying.unembed.stacked_states`); readout: its
    `tying.unembed.Readout`. p_L, the model's own distribution, is the softmax of state L's readout.
    Per chunk of tokens: the logits of all L translated states and of state L, softmax in place,
    softmax(q_l) - p_L in place, then dL/dz_l = (softmax(q_l) - p_L) W / N, the unembedding's
    backward written out; autograd carries it through the final norm and the translators.
    """
    n, n_tokens = len(states) - 1, states.shape[1]
    z = readout.norm(lens.translate(states[:n]).to(states.dtype))  # (n, N, d), with autograd
    step = _chunk_tokens(n + 1, readout.weight, chunk_bytes)
    with torch.no_grad():
        target, free = readout.norm(states[n]), z.detach()
        grad = torch.empty_like(free)
        for lo in range(0, n_tokens, step):
            rows = torch.cat([free[:, lo : lo + step], target[None, lo : lo + step]])  # (n + 1, c, d)
            q = readout.logits(rows.reshape(-1, rows.shape[-1]))  # one product, ((n + 1) c, V)
            torch.softmax(q, -1, out=q)
            q = q.view(n + 1, -1, q.shape[-1])
            grad[:, lo : lo + step] = readout.state_gradient(q[:n].sub_(q[n]))
        grad.div_(n_tokens)
    z.backward(grad)


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
    step = _chunk_tokens(sum(sizes) + 1, readout.weight, chunk_bytes)
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


def lens_optimizer(params, *, optimizer, lr, momentum, weight_decay):
    """tuned-lens's optimizers: "sgd" (Nesterov, torch lr = lr * (1 - momentum)) or "adam" (amsgrad)."""
    if optimizer == "sgd":
        return torch.optim.SGD(params, lr=lr * (1 - momentum), momentum=momentum, nesterov=True,
                               weight_decay=weight_decay)
    if optimizer == "adam":
        return torch.optim.Adam(params, lr=lr, betas=(momentum, 0.999), amsgrad=True, weight_decay=weight_decay)
    raise PipelineError(f"unknown lens optimizer {optimizer!r} (sgd or adam)")


def train_lens(model, tokens, *, seq_len, steps, batch_size, lr, optimizer="sgd", momentum=0.9, weight_decay=1e-3,
               grad_clip=1.0, seed=0, whiten=False, fisher=False, train_dtype="float32", on_step=None,
               chunk_bytes=None):
    """Fit a tuned lens to a frozen causal LM on windows drawn at random from `tokens`.

    tokens: flat token ids (np.ndarray or memmap); each step reads batch_size windows of
    seq_len tokens, drawn by a generator seeded with `seed`. The recipe is tuned-lens's (see
    the module docstring): `lens_optimizer`, `lens_schedule`, gradient norm clipped
    at `grad_clip` (None: not clipped). whiten: train the translators in whitened coordinates
    (`WhitenedLens`, its whitening from FIT_WINDOWS windows of a generator of its own, so the training
    windows do not depend on it): the same start (zero, the logit lens), a better conditioned path, the
    weight decay on the whitened weights; with `fisher`, the output side whitened too (`readout_fisher`).
    train_dtype: the dtype of the steps' readout products (`tying.unembed.product_dtype`: float32, bfloat16
    or auto; the job's log names it); their softmax, the loss and the translators stay float32. on_step(step, lens), when given, is
    called after each step 1..steps. Returns the lens on the model's device, in eval mode.
    """
    from tying.unembed import Readout, product_dtype, stacked_states  # here: tying.lens imports no transformers
    _check_tokens(model, tokens, seq_len)
    if whiten:
        lens = whitened_lens(model, tokens, seq_len=seq_len, batch_size=batch_size, seed=seed, fisher=fisher)
    else:
        if fisher:
            raise PipelineError("lens.fisher whitens the translators' output side; it needs lens.whiten")
        lens = TunedLens(model.config.num_hidden_layers, model.config.hidden_size).to(model.device)
    opt = lens_optimizer(lens.parameters(), optimizer=optimizer, lr=lr, momentum=momentum, weight_decay=weight_decay)
    schedule = torch.optim.lr_scheduler.LambdaLR(opt, lens_schedule(steps))
    rng, readout = np.random.default_rng(seed), Readout(model, product_dtype(train_dtype, model.device))
    print(f"lens: {steps} steps, their readout products in {str(readout.weight.dtype).removeprefix('torch.')}",
          file=sys.stderr, flush=True)
    for step in range(1, steps + 1):
        starts = rng.integers(0, len(tokens) - seq_len + 1, size=batch_size)
        states = stacked_states(model, _windows(tokens, starts, seq_len, model.device))
        opt.zero_grad(set_to_none=True)
        backward_lens(lens, readout, states, chunk_bytes)
        if grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(lens.parameters(), grad_clip, foreach=True)
        opt.step()
        schedule.step()
        if on_step is not None:
            on_step(step, lens)
    return lens.plain() if isinstance(lens, WhitenedLens) else lens.eval()


def check_step(steps):
    """The step at which the lens job keeps its check copy: CHECK_FRACTION of `steps`, at least 1."""
    return max(1, round(CHECK_FRACTION * steps))


def lens_schedule(steps):
    """The learning rate's factor of the peak after k = 0, 1, ... optimiser steps (LambdaLR's): linear from 1
    to 0 over the first check_step(steps), then linear from RESTART to 0 over the rest, so the check copy
    is an annealed lens and the steps after it refine it. (Linear decay over the whole budget left the
    check copy at a quarter of the peak, still moving with its noise: at 500 steps C3 moved 0.0067 bits
    over the last quarter on a scaling cell's seed, d48_l2_s1500's seed 2, and 0.0006 with the restart,
    the final lens's held-out KL the same to 0.0001 bits.)"""
    cycle = check_step(steps)

    def factor(k):
        return 1 - k / cycle if k < cycle else RESTART * (1 - (k - cycle) / max(steps - cycle, 1))
    return factor


@torch.no_grad()
def whitened_lens(model, tokens, *, seq_len, batch_size, seed=0, windows=FIT_WINDOWS, fisher=False):
    """A zero WhitenedLens (the logit lens) whose whitening comes from the states of `windows` windows
    drawn from `tokens` (`_moments`); a ridge of 1e-6 of the mean variance keeps it finite. With `fisher`,
    its output side is P_l = (F_l / max eig F_l + FISHER_DAMPING I)^(-1/2), F_l `readout_fisher` on the same
    windows."""
    xx, fish = _moments(model, tokens, seq_len=seq_len, batch_size=batch_size, seed=seed, windows=windows,
                        fisher=fisher)
    d, count = xx.shape[-1] - 1, xx[:, -1, -1]
    mean = xx[:, :d, d] / count[:, None]
    cov = xx[:, :d, :d] / count[:, None, None] - mean.unsqueeze(-1) * mean.unsqueeze(-2)
    cov += 1e-6 * torch.diagonal(cov, dim1=1, dim2=2).mean(-1)[:, None, None] * torch.eye(d, dtype=cov.dtype,
                                                                                         device=cov.device)
    output = None if fish is None else _inverse_sqrt(fish, damping=FISHER_DAMPING).float()
    return WhitenedLens(mean.float(), _inverse_sqrt(cov).float(), output).to(model.device)


def _inverse_sqrt(matrices, damping=None):
    """M^(-1/2) of symmetric positive (semi)definite matrices (..., d, d); with `damping`, of
    M / (its largest eigenvalue) + damping I."""
    values, vectors = torch.linalg.eigh(matrices)
    if damping is not None:
        values = values / values[..., -1:] + damping
    return vectors @ torch.diag_embed(values.rsqrt()) @ vectors.transpose(-1, -2)


def readout_fisher(readout, states, generator=None):
    """Sum over tokens of g g^T per state l < L: the readout's Fisher at each state (float64 (L, d, d)).

    g is the gradient, with respect to state l, of the log-loss of a label y drawn from the model's own
    distribution p_L, at the logits of the final norm and unembedding applied to state l with p_L as
    their softmax: J_l^T W^T (p_L - e_y), J_l the final norm's Jacobian at state l. Its expectation over
    y is J_l^T W^T (diag p_L - p_L p_L^T) W J_l, the curvature of the lens's KL at its optimum (lens
    distribution p_L), so P_l = F_l^(-1/2) is K-FAC's output-side factor. states: (L + 1, N, d).
    """
    n = len(states) - 1
    p = torch.softmax(readout.logits(readout.norm(states[n])), -1)
    y = torch.multinomial(p, 1, generator=generator)
    g = readout.state_gradient(p.scatter_add_(1, y, torch.full_like(p[:, :1], -1.0)))  # (N, d): W^T (p - e_y)
    with torch.enable_grad():
        h = states[:n].detach().requires_grad_(True)
        (pulled,) = torch.autograd.grad(readout.norm(h), h, g.expand(n, *g.shape))
    pulled = pulled.double()
    return pulled.transpose(1, 2) @ pulled


@torch.no_grad()
def _moments(model, tokens, *, seq_len, batch_size, seed, windows, fisher=False):
    """Sums over `windows` windows of x x^T, x = [h_l, 1] for each state l < L: (n, d + 1, d + 1) float64;
    windows from a generator seeded with [seed, 1]. With `fisher`, also `readout_fisher` summed over the same
    windows (labels drawn by a torch generator seeded with `seed`), else None."""
    from tying.unembed import Readout, stacked_states

    rng, n, d = np.random.default_rng([seed, 1]), model.config.num_hidden_layers, model.config.hidden_size
    starts = rng.integers(0, len(tokens) - seq_len + 1, size=windows)
    xx = torch.zeros(n, d + 1, d + 1, dtype=torch.float64, device=model.device)
    fish = torch.zeros(n, d, d, dtype=torch.float64, device=model.device) if fisher else None
    readout, labels = Readout(model), torch.Generator(device=model.device).manual_seed(seed)
    for i in range(0, windows, batch_size):
        states = stacked_states(model, _windows(tokens, starts[i : i + batch_size], seq_len, model.device))
        if fisher:
            fish += readout_fisher(readout, states, labels)
        x = torch.cat([states[:n], torch.ones_like(states[:n, :, :1])], -1).double()  # (n, N, d + 1)
        xx += x.transpose(1, 2) @ x
    return xx, fish


RECIPE = ("optimizer", "lr", "momentum", "weight_decay", "grad_clip", "whiten", "fisher", "train_dtype")


def recipe(cfg):
    """train_lens's keyword arguments from a config's `lens:` section (steps, batch_size, seq_len, RECIPE;
    a section without `whiten`, `fisher` or `train_dtype`, an older one, trains the plain translators in
    float32)."""
    older = {"whiten": False, "fisher": False, "train_dtype": "float32"}
    return {key: cfg.get(key, older[key]) if key in older else cfg[key]
            for key in ("steps", "batch_size", "seq_len", *RECIPE)}


def load_job(files, cfg):
    """A lens job's frozen model, placed by `lens_placement` from the config's lens.device and lens.dtype,
    and its train and val token arrays: `files` maps model, train, val and meta to paths."""
    from tying.unembed import frozen_model, lens_placement

    device, dtype = lens_placement(cfg["device"], cfg["dtype"])
    return (frozen_model(files["model"], device=device, dtype=dtype), load_ids(files["train"], files["meta"]),
            load_ids(files["val"], files["meta"]))


def lens_job(model, train, val, cfg, *, seed):
    """A lens job: the config's lens, its held-out KL, and its own convergence check.

    The lens trains for lens.steps; at CHECK_FRACTION of them a copy of its translators is kept, and
    both are scored on the validation windows (the copy at C3's early states only, `early_states`).
    Returns (lens, `evaluate_lens` frame, windows frame: window, layer, kl_bits of the tuned lens at
    the end and kl_check_bits at the check (NaN past the early states), check_step, steps).
    """
    steps = cfg["steps"]
    check_at, kept = check_step(steps), {}
    keep = lambda step, lens: kept.setdefault("lens", _copy(lens)) if step == check_at else None
    lens = train_lens(model, train, **recipe(cfg), seed=seed, on_step=keep)
    early = early_states(model.config.num_hidden_layers)
    windows = window_kl(model, lens, val, **_scoring(cfg), more={"check": (kept.get("lens", lens), early)})
    tuned, check = (windows[windows["lens"] == name].drop(columns="lens") for name in ("tuned", "check"))
    per_window = tuned.merge(check.rename(columns={"kl_bits": "kl_check_bits"}), on=["window", "layer"], how="left")
    frame = summarise(windows[windows["lens"] != "check"])
    return lens, frame, per_window.assign(check_step=check_at if steps else 0, steps=steps)


def reference_check(model, train, val, cfg, budget, *, seed):
    """C3's certificate on one model: a reference lens trained for REFERENCE_FACTOR times lens.steps (the
    same recipe and seed), scored on the same validation windows as the lens job's `budget` frame.
    Returns `convergence`'s frame with steps and reference_steps."""
    steps = REFERENCE_FACTOR * cfg["steps"]
    lens = train_lens(model, train, **{**recipe(cfg), "steps": steps}, seed=seed)
    reference = summarise(window_kl(model, lens, val, **_scoring(cfg), logit=False))
    return convergence(budget, reference).assign(steps=cfg["steps"], reference_steps=steps)


def early_states(n_blocks):
    """C3's early states of a model with n_blocks blocks: 0 .. ceil(L/2) - 1 (`tying.claims.early_layer_gap`)."""
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
    from tying.unembed import Readout, stacked_states

    _check_tokens(model, tokens, seq_len)
    starts = np.arange(0, len(tokens) - seq_len + 1, seq_len)
    starts = starts if batches is None else starts[: batches * batch_size]
    n, readout = model.config.num_hidden_layers, Readout(model)
    names = ["tuned", *(more or {})]
    lenses = [(lens, None), *[(m, [s for s in layers if s < n]) for m, layers in (more or {}).values()]]
    kl = {name: [] for name in [*names, "logit"]}
    for i in range(0, len(starts), batch_size):
        batch = starts[i : i + batch_size]
        states = stacked_states(model, _windows(tokens, batch, seq_len, model.device))
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


def summarise(windows):
    """`window_kl`'s frame as mean KL per state over its windows (equal-length windows: per token):
    layer, lens, kl_bits, n_windows."""
    out = windows.groupby(["lens", "layer"])["kl_bits"].agg(["mean", "size"]).reset_index()
    out = out.rename(columns={"mean": "kl_bits", "size": "n_windows"})
    return out.sort_values(["lens", "layer"], ignore_index=True)


def evaluate_lens(model, lens, tokens, *, seq_len, batch_size, batches=None):
    """Mean KL per token (bits) of the tuned and the logit lens at every state 0..L, over the held-out
    windows `window_kl` reads. Returns a tidy frame: layer (int), lens ("tuned"/"logit"), kl_bits
    (float), n_windows."""
    return summarise(window_kl(model, lens, tokens, seq_len=seq_len, batch_size=batch_size, batches=batches))


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


def _scoring(cfg):
    """evaluate_lens's window arguments from a `lens:` section (eval_batches null or absent: every window)."""
    return {"seq_len": cfg["seq_len"], "batch_size": cfg["batch_size"], "batches": cfg.get("eval_batches")}


def _window_frame(kl, layers, name, n_blocks, with_last):
    """(len(layers), W) per-window KL -> tidy rows; with_last adds state L (KL 0: the model's own logits)."""
    values = kl.cpu().numpy()
    frame = pd.DataFrame({"window": np.tile(np.arange(values.shape[1]), len(layers)),
                          "layer": np.repeat(layers, values.shape[1]), "lens": name,
                          "kl_bits": values.reshape(-1).astype(float)})
    if with_last:
        frame = pd.concat([frame, pd.DataFrame({"window": np.arange(values.shape[1]), "layer": n_blocks,
                                                "lens": name, "kl_bits": 0.0})], ignore_index=True)
    return frame


def _copy(lens):
    """A detached copy of a lens's translators (for a check point along its training)."""
    if isinstance(lens, WhitenedLens):
        return lens.plain()
    copy = TunedLens(*lens.bias.shape).to(lens.bias.device)
    copy.load_state_dict(lens.state_dict())
    return copy.eval()


def _chunk_tokens(rows_per_token, weight, chunk_bytes):
    """Tokens per chunk so that `rows_per_token` float32 logits rows of each stay within chunk_bytes
    (default CHUNK_BYTES of the weight's device type)."""
    budget = CHUNK_BYTES.get(weight.device.type, CHUNK_BYTES["cuda"]) if chunk_bytes is None else chunk_bytes
    return max(1, budget // (rows_per_token * len(weight) * 4))


def _check_tokens(model, tokens, seq_len):
    if len(tokens) < seq_len:
        raise PipelineError(f"lens needs at least {seq_len} tokens, got {len(tokens)}")
    vocab = model.get_input_embeddings().num_embeddings
    if int(tokens.max()) >= vocab:
        raise PipelineError(f"token id {int(tokens.max())} is outside the model's vocabulary of {vocab}")


def _windows(tokens, starts, seq_len, device):
    """Token windows tokens[s : s + seq_len] for each start: -> (len(starts), seq_len) int64."""
    return torch.from_numpy(np.stack([np.asarray(tokens[s : s + seq_len], dtype=np.int64) for s in starts])).to(device)

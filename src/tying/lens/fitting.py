"""Fitting a tuned lens to a frozen model on windows drawn at random from its training tokens.

Training follows `tuned-lens` 0.2 (`tuned_lens/scripts/train_loop.py`, `ingredients.Optimizer`): the loss
is the sum over states of the mean KL in nats, the gradient's global norm over all translators is clipped
at 1.0, and its default optimizer is SGD with Nesterov momentum 0.9, weight decay 1e-3 and a learning rate
given as the momentum-corrected step (the torch lr is lr * (1 - momentum)), decayed linearly to 0 with no
warmup. Its Adam alternative (amsgrad, betas (momentum, 0.999), no warmup) is `optimizer="adam"`.
What differs: the budget (tuned-lens: 250 steps of 2^18 tokens); the schedule (`lens_schedule`: the linear
decay reaches 0 at CHECK_FRACTION of the steps, so the lens there, which the lens job's convergence check
compares the end with, is annealed; the rest restarts at RESTART of the peak and decays to 0 again); the
windows (drawn from a flat token array rather than a shuffled chunked dataset); the precision (float32
translators, softmax and loss; `train_dtype` runs a step's readout products in bfloat16 or float32); and,
with `whiten`, the coordinates the optimiser works in (tying.lens.translators). A closed-form least-squares
start was tried and dropped: it reaches the embedding state's optimum far more slowly than zero.

A step's cost is its readout, every state's logits over the full vocabulary. `backward_lens` forms them for
all states together, a chunk of tokens at a time, turns them into softmax(q) - p in place, and
backpropagates through the frozen unembedding by hand, one product back to the normed states (autograd
only from there): 2L + 1 products of (tokens x d) by (d x V) a step, the bound benchmarks/lens_speed.py
measures the step against.
"""

import sys
import time

import numpy as np
import torch

from tying.errors import PipelineError
from tying.lens.scoring import chunk_tokens, token_kl
from tying.lens.translators import TunedLens, WhitenedLens, whitened_lens
from tying.lens.unembed import Readout, check_tokens, product_dtype, stacked_states, token_windows

CHECK_FRACTION = 0.75  # the lens job's own convergence check: held-out C3 at this fraction of the budget


RESTART = 0.25  # the learning rate of the steps after the check, at their start, as a fraction of the peak
LOG_EVERY = 50  # a progress line every this many steps, and at the last, as training prints its own


def backward_lens(lens, readout, states, chunk_bytes=None):
    """Backpropagate the lens loss, the sum over states l < L of the mean KL(p_L || q_l) in nats,
    into the translators' gradients, in 2L + 1 products: per state, the mean KL's gradient in the logits is
    (softmax(q) - p) / N, all the training needs, so the KL's value is never formed.

    states: (L + 1, N, d), the model's states 0..L (`tying.lens.unembed.stacked_states`); readout: its
    `tying.lens.unembed.Readout`. p_L, the model's own distribution, is the softmax of state L's readout.
    Per chunk of tokens: the logits of all L translated states and of state L, softmax in place,
    softmax(q_l) - p_L in place, then dL/dz_l = (softmax(q_l) - p_L) W / N, the unembedding's
    backward written out; autograd carries it through the final norm and the translators.
    """
    n, n_tokens = len(states) - 1, states.shape[1]
    z = readout.norm(lens.translate(states[:n]).to(states.dtype))  # (n, N, d), with autograd
    step = chunk_tokens(n + 1 + n * (readout.softcap is not None), readout.weight, chunk_bytes)
    with torch.no_grad():
        target, free = readout.norm(states[n]), z.detach()
        grad = torch.empty_like(free)
        for lo in range(0, n_tokens, step):
            rows = torch.cat([free[:, lo : lo + step], target[None, lo : lo + step]])  # (n + 1, c, d)
            q = readout.logits(rows.reshape(-1, rows.shape[-1]))  # one product, ((n + 1) c, V)
            slope = readout.cap_slope(q.view(n + 1, -1, q.shape[-1])[:n])  # a soft cap's, before q is overwritten
            torch.softmax(q, -1, out=q)
            q = q.view(n + 1, -1, q.shape[-1])
            diff = q[:n].sub_(q[n])
            grad[:, lo : lo + step] = readout.state_gradient(diff if slope is None else diff.mul_(slope))
        grad.div_(n_tokens)
    z.backward(grad)


def lens_optimizer(params, *, optimizer, lr, momentum, weight_decay):
    """tuned-lens's optimizers: "sgd" (Nesterov, torch lr = lr * (1 - momentum)) or "adam" (amsgrad)."""
    if optimizer == "sgd":
        return torch.optim.SGD(
            params, lr=lr * (1 - momentum), momentum=momentum, nesterov=True, weight_decay=weight_decay
        )
    if optimizer == "adam":
        return torch.optim.Adam(params, lr=lr, betas=(momentum, 0.999), amsgrad=True, weight_decay=weight_decay)
    raise PipelineError(f"unknown lens optimizer {optimizer!r} (sgd or adam)")


def train_lens(
    model,
    tokens,
    *,
    seq_len,
    steps,
    batch_size,
    lr,
    optimizer="sgd",
    momentum=0.9,
    weight_decay=1e-3,
    grad_clip=1.0,
    seed=0,
    whiten=False,
    fisher=False,
    train_dtype="float32",
    schedule="restart",
    on_step=None,
    chunk_bytes=None,
):
    """Fit a tuned lens to a frozen causal LM on windows drawn at random from `tokens`.

    tokens: flat token ids (np.ndarray or memmap); each step reads batch_size windows of
    seq_len tokens, drawn by a generator seeded with `seed`. The recipe is tuned-lens's (see
    the module docstring): `lens_optimizer`, `lens_schedule`, gradient norm clipped
    at `grad_clip` (None: not clipped). whiten: train the translators in whitened coordinates
    (`WhitenedLens`, its whitening from FIT_WINDOWS windows of a generator of its own, so the training
    windows do not depend on it): the same start (zero, the logit lens), a better conditioned path, the
    weight decay on the whitened weights; with `fisher`, the output side whitened too (`readout_fisher`).
    train_dtype: the dtype of the steps' readout products (`tying.lens.unembed.product_dtype`: float32, bfloat16
    or auto; the job's log names it); their softmax, the loss and the translators stay float32. schedule: "restart"
    (`lens_schedule`) or "linear" (tuned-lens's, `linear_schedule`). on_step(step, lens), when given, is
    called after each step 1..steps. Zero steps return the zero start: the logit lens. Returns the lens on the
    model's device, in eval mode.
    """
    check_tokens(model, tokens, seq_len)
    if whiten:
        lens = whitened_lens(model, tokens, seq_len=seq_len, batch_size=batch_size, seed=seed, fisher=fisher)
    else:
        if fisher:
            raise PipelineError("lens.fisher whitens the translators' output side; it needs lens.whiten")
        lens = TunedLens(model.config.num_hidden_layers, model.config.hidden_size).to(model.device)
    opt = lens_optimizer(lens.parameters(), optimizer=optimizer, lr=lr, momentum=momentum, weight_decay=weight_decay)
    if schedule not in SCHEDULES:
        raise PipelineError(f"unknown lens schedule {schedule!r} ({' or '.join(SCHEDULES)})")
    scheduler = torch.optim.lr_scheduler.LambdaLR(opt, SCHEDULES[schedule](steps))
    rng, readout = np.random.default_rng(seed), Readout(model, product_dtype(train_dtype, model.device))
    print(
        f"lens: {steps} steps, their readout products in {str(readout.weight.dtype).removeprefix('torch.')}",
        file=sys.stderr,
        flush=True,
    )
    started = time.perf_counter()
    for step in range(1, steps + 1):
        starts = rng.integers(0, len(tokens) - seq_len + 1, size=batch_size)
        states = stacked_states(model, token_windows(tokens, starts, seq_len, model.device))
        opt.zero_grad(set_to_none=True)
        backward_lens(lens, readout, states, chunk_bytes)
        if grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(lens.parameters(), grad_clip, foreach=True)
        opt.step()
        scheduler.step()
        if step % LOG_EVERY == 0 or step == steps:
            progress(step, steps, started, lens, readout, states)
        if on_step is not None:
            on_step(step, lens)
    return lens.plain() if isinstance(lens, WhitenedLens) else lens.eval()


def progress(step, steps, started, lens, readout, states):
    """The lens's progress line on stderr (the job's log): the step, the mean KL over states 0..L-1 of this
    step's batch under the lens as it now is, and the time left at the pace so far."""
    kl = float(token_kl([(lens, None)], readout, states, logit=False)[0][0].mean())
    left = (time.perf_counter() - started) / step * (steps - step)
    print(
        f"lens: step {step}/{steps} KL {kl:.4f} bits (this batch, mean over states) | "
        f"left {time.strftime('%H:%M:%S', time.gmtime(left))}",
        file=sys.stderr,
        flush=True,
    )


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


def linear_schedule(steps):
    """tuned-lens's schedule for SGD (transformers' get_linear_schedule_with_warmup with no warmup): the
    factor falls linearly from 1 to 0 over the whole budget."""
    return lambda k: max(0.0, 1 - k / max(steps, 1))


SCHEDULES = {"restart": lens_schedule, "linear": linear_schedule}


RECIPE = ("optimizer", "lr", "momentum", "weight_decay", "grad_clip", "whiten", "fisher", "train_dtype")


def recipe(cfg):
    """train_lens's keyword arguments from a config's `lens:` section: steps, batch_size, seq_len, RECIPE."""
    return {key: cfg[key] for key in ("steps", "batch_size", "seq_len", *RECIPE)}

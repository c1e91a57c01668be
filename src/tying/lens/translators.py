"""Tuned-lens translators: per-state affine maps read through the model's frozen readout.

For a model with L blocks, states 0..L are indexed as in `tying.lens.unembed` (0 = embedding output, l =
output of block l). State l < L has its own translator h -> h + A_l h + b_l; state L is read as is, which
reproduces the model's logits (KL 0). The start is zero: the logit lens.

`WhitenedLens` trains the same maps in whitened coordinates: translator l as h + C_l S_l (h - mu_l) + c_l,
S_l the inverse square root of state l's covariance (one pass over FIT_WINDOWS windows). Adam's
per-parameter steps then no longer fight the states' correlated, unequal directions, and the weight decay,
on C_l = A_l Cov_l^(1/2), penalises what the translator does to the data (E |A_l (h - mu_l)|^2) rather
than A_l's raw entries. With `fisher`, the output side is whitened too, as K-FAC's two factors do:
h + P_l (C_l S_l (h - mu_l) + c_l), P_l the inverse square root of the readout's Fisher at state l
(`readout_fisher`, damped), so directions the readout barely responds to are no longer learnt at the pace
of those it amplifies (benchmarks/studies/lens_recipes.py).
"""

import numpy as np
import torch
from safetensors.torch import save_file

from tying.io import atomic_path
from tying.lens.unembed import Readout, stacked_states, token_windows

FIT_WINDOWS = 256  # windows (of the training tokens) whose states' covariance the whitening comes from


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
        self.register_buffer(
            "output",
            torch.eye(mean.shape[1], dtype=whiten.dtype, device=whiten.device).expand_as(whiten).clone()
            if output is None
            else output,
        )

    def effective(self, index=None):
        """(A, b) of the translators (all, or those `index` lists), with autograd."""
        weight, bias, mean, whiten, output = (
            (self.weight, self.bias, self.mean, self.whiten, self.output)
            if index is None
            else (self.weight[index], self.bias[index], self.mean[index], self.whiten[index], self.output[index])
        )
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


@torch.no_grad()
def whitened_lens(model, tokens, *, seq_len, batch_size, seed=0, windows=FIT_WINDOWS, fisher=False):
    """A zero WhitenedLens (the logit lens) whose whitening comes from the states of `windows` windows
    drawn from `tokens` (`_moments`); a ridge of 1e-6 of the mean variance keeps it finite. With `fisher`,
    its output side is P_l = (F_l / max eig F_l + FISHER_DAMPING I)^(-1/2), F_l `readout_fisher` on the same
    windows."""
    xx, fish = _moments(
        model, tokens, seq_len=seq_len, batch_size=batch_size, seed=seed, windows=windows, fisher=fisher
    )
    d, count = xx.shape[-1] - 1, xx[:, -1, -1]
    mean = xx[:, :d, d] / count[:, None]
    cov = xx[:, :d, :d] / count[:, None, None] - mean.unsqueeze(-1) * mean.unsqueeze(-2)
    cov += (
        1e-6
        * torch.diagonal(cov, dim1=1, dim2=2).mean(-1)[:, None, None]
        * torch.eye(d, dtype=cov.dtype, device=cov.device)
    )
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
    distribution p_L), so P_l = F_l^(-1/2) is K-FAC's output-side factor. A model that scales or soft-caps its
    logits has them in the chain (Readout.state_gradient, Readout.cap_slope at state L's logits). states:
    (L + 1, N, d).
    """
    n = len(states) - 1
    logits = readout.logits(readout.norm(states[n]))
    slope, p = readout.cap_slope(logits), torch.softmax(logits, -1)
    y = torch.multinomial(p, 1, generator=generator)
    residual = p.scatter_add_(1, y, torch.full_like(p[:, :1], -1.0))
    g = readout.state_gradient(residual if slope is None else residual * slope)  # (N, d): W^T (p - e_y)
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

    rng, n, d = np.random.default_rng([seed, 1]), model.config.num_hidden_layers, model.config.hidden_size
    starts = rng.integers(0, len(tokens) - seq_len + 1, size=windows)
    xx = torch.zeros(n, d + 1, d + 1, dtype=torch.float64, device=model.device)
    fish = torch.zeros(n, d, d, dtype=torch.float64, device=model.device) if fisher else None
    readout, labels = Readout(model), torch.Generator(device=model.device).manual_seed(seed)
    for i in range(0, windows, batch_size):
        states = stacked_states(model, token_windows(tokens, starts[i : i + batch_size], seq_len, model.device))
        if fisher:
            fish += readout_fisher(readout, states, labels)
        x = torch.cat([states[:n], torch.ones_like(states[:n, :, :1])], -1).double()  # (n, N, d + 1)
        xx += x.transpose(1, 2) @ x
    return xx, fish


def save_lens(lens, path):
    """Write the translators as safetensors (weight (n, d, d), bias (n, d)), atomically."""
    with atomic_path(path) as tmp:
        save_file({k: v.detach().float().cpu().contiguous() for k, v in lens.state_dict().items()}, tmp)


def copy_lens(lens):
    """A detached copy of a lens's translators (for a check point along its training)."""
    if isinstance(lens, WhitenedLens):
        return lens.plain()
    copy = TunedLens(*lens.bias.shape).to(lens.bias.device)
    copy.load_state_dict(lens.state_dict())
    return copy.eval()

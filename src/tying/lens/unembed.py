"""A causal LM's frozen readout (final norm, then unembedding) and the residual states it reads.

State indexing, used across the lens code: for a model with L blocks, state 0 is the
embedding output, state l (1 <= l <= L) is the output of block l, all *before* the final
norm. transformers' `hidden_states[-1]` is already normed in the families it ships, so
state L is taken from the final norm's input instead; the readout of state L is then
exactly the model's logits.

The final norm is found from the model, not a table of families: it is the last norm module
(a LayerNorm, an RMSNorm, or a module whose class is named for a norm) that the base model's
forward runs, and it is accepted only when a forward pass on a few tokens shows that it, the
unembedding and the logit post-processing the model's config states (`logit_processing`: a scalar scale,
Cohere's `logit_scale` and Granite's `logits_scaling`, then a final soft cap, Gemma 2's
`final_logit_softcapping`), applied to its captured input, reproduce the model's logits. A family whose
logits are not that readout (OPT with a projection after its final norm) is refused with one line naming it.
"""

import sys
import weakref

import numpy as np
import torch

from tying.errors import PipelineError
from tying.runtime import resolve_device
from tying.train.models import DTYPES

PROBE_TOKENS = 8  # tokens of the forward pass that finds and checks a model's final norm
_FINAL_NORMS = weakref.WeakKeyDictionary()  # model -> its final norm, found once per model


def lens_placement(device, dtype):
    """(device, dtype) the lens runs its frozen model in, for the config's `lens.device`, `lens.dtype`.

    "auto" is CUDA when present; when it falls back to the CPU, bfloat16 becomes float32, said on
    stderr (the job's log), since a CPU without native bfloat16 instructions emulates it, slower than
    float32. An explicit "cpu" keeps bfloat16 (faster than float32 on CPUs with those instructions).
    """
    resolved = resolve_device(device)
    if device == "auto" and resolved == "cpu" and dtype == "bfloat16":
        print(
            "lens: no GPU, so lens.dtype bfloat16 runs as float32 on the CPU "
            "(set lens.device: cpu to keep bfloat16)",
            file=sys.stderr,
            flush=True,
        )
        return resolved, "float32"
    return resolved, dtype


def product_dtype(name, device):
    """The dtype the lens's training products run in, for the config's `lens.train_dtype` on `device`:
    "auto" is bfloat16 where products in it are native (CUDA; a CPU with AVX512-BF16 or AMX), else float32
    (a CPU without them emulates bfloat16, slower than float32)."""
    if name != "auto":
        return DTYPES[name]
    native = (
        torch.device(device).type == "cuda"
        or torch.cpu._is_avx512_bf16_supported()
        or torch.cpu._is_amx_tile_supported()
    )
    return torch.bfloat16 if native else torch.float32


def logit_processing(config):
    """(scale, softcap) a model applies to its unembedding's output, from its config: logits = scale x raw, then
    softcap x tanh(logits / softcap) when softcap is not None; (1.0, None) for most families."""
    scale = float(getattr(config, "logit_scale", None) or 1.0)  # Cohere: logits * logit_scale
    if getattr(config, "logits_scaling", None):  # Granite: logits / logits_scaling
        scale /= float(config.logits_scaling)
    softcap = getattr(config, "final_logit_softcapping", None)  # Gemma 2 and 3
    return scale, None if softcap is None else float(softcap)


def processed(logits, scale, softcap):
    """`logits` (float32) post-processed as logit_processing says, in place; untouched for (1.0, None)."""
    if scale != 1.0:
        logits.mul_(scale)
    if softcap is not None:
        logits.div_(softcap).tanh_().mul_(softcap)
    return logits


def final_norm(model):
    """The norm applied to the last residual state before the unembedding (found once per model)."""
    if model not in _FINAL_NORMS:
        _FINAL_NORMS[model] = _find_final_norm(model)
    return _FINAL_NORMS[model]


@torch.no_grad()
def _find_final_norm(model):
    """The last norm module the base model runs, checked to reproduce the logits (module docstring)."""
    kind, head = model.config.model_type, model.get_output_embeddings()
    if not isinstance(head, torch.nn.Linear):
        raise PipelineError(f"no lens readout for model type {kind!r}: its unembedding is not a linear layer")
    order, hooks = (
        [],
        [
            module.register_forward_pre_hook(lambda module, args: order.append((module, args[0])))
            for module in model.base_model.modules()
            if _is_norm(module)
        ],
    )
    try:
        ids = torch.arange(PROBE_TOKENS, device=head.weight.device)[None] % head.out_features
        out = model(input_ids=ids, output_hidden_states=True, use_cache=False)
    finally:
        for hook in hooks:
            hook.remove()
    if not order:
        raise PipelineError(f"no lens readout for model type {kind!r}: its base model runs no norm module")
    norm, state = order[-1]
    if len(out.hidden_states) != model.config.num_hidden_layers + 1 or state.shape[-1] != head.in_features:
        raise PipelineError(
            f"no lens readout for model type {kind!r}: its last norm does not feed the unembedding "
            f"(width {state.shape[-1]}, unembedding {head.in_features})"
        )
    logits = processed(head(norm(state)).float(), *logit_processing(model.config))
    if not torch.allclose(logits, out.logits.float(), rtol=1e-3, atol=1e-3 * (1 + float(logits.abs().max()))):
        raise PipelineError(
            f"no lens readout for model type {kind!r}: its logits are not the unembedding of its last norm's output"
        )
    return norm


def _is_norm(module):
    """A LayerNorm, an RMSNorm, or a leaf module whose class is named for a norm (OlmoLayerNorm, GemmaRMSNorm)."""
    return isinstance(module, (torch.nn.LayerNorm, torch.nn.RMSNorm)) or (
        "norm" in type(module).__name__.lower() and next(module.children(), None) is None
    )


@torch.no_grad()
def stacked_states(model, input_ids):
    """Residual states 0..L, without the model's logits: (B, T) -> (L + 1, B * T, d).

    Runs the model's base (no unembedding): the lens forms the logits of state L itself, with
    those of the other states, in one product (`Readout`).
    """
    states, _ = _states(model, model.base_model, input_ids)
    return torch.stack(states).flatten(1, 2)


class Readout:
    """The frozen readout of a model as the lens's fast path uses it: the final norm (applied with
    autograd, so gradients reach the translators), the unembedding's weight (V, d) and bias (V or
    None), used directly in products over many states' rows at once, and the model's logit scale and soft cap
    (logit_processing); with `dtype`, the products run in it (a copy of the weight and bias in that dtype)."""

    def __init__(self, model, dtype=None):
        head = model.get_output_embeddings()
        self.norm, self.weight, self.bias = final_norm(model), head.weight, head.bias
        self.scale, self.softcap = logit_processing(model.config)
        if dtype is not None:
            self.weight, self.bias = (None if t is None else t.to(dtype) for t in (self.weight, self.bias))

    def logits(self, z):
        """Logits of normed states: (..., d) -> (..., V), in float32 (a float32 model's: no copy), scaled and
        soft-capped as the model's are."""
        logits = torch.nn.functional.linear(z.to(self.weight.dtype), self.weight, self.bias).float()
        return processed(logits, self.scale, self.softcap)

    def cap_slope(self, logits):
        """d(logits)/d(scaled logits) of the soft cap at `logits` (its output), 1 - (logits / softcap)^2; None
        without a soft cap. The lens's hand-written backward multiplies by it before state_gradient."""
        return None if self.softcap is None else 1 - (logits / self.softcap).square()

    def state_gradient(self, grad_logits):
        """dL/dz from dL/d(logits) before the soft cap (cap_slope): (..., V) -> (..., d), in the products' dtype
        (one 2-D product: a batched one runs slower on the CPU), times the logit scale."""
        grad = grad_logits.to(self.weight.dtype)
        grad = (grad.reshape(-1, grad.shape[-1]) @ self.weight).reshape(*grad.shape[:-1], -1)
        return grad if self.scale == 1.0 else grad * self.scale


def _states(model, module, input_ids):
    """Run `module` (the model or its base) with the final norm's input captured: (states 0..L, output)."""
    captured = []
    hook = final_norm(model).register_forward_pre_hook(lambda module, args: captured.append(args[0]))
    try:
        out = module(input_ids=input_ids, output_hidden_states=True, use_cache=False)
    finally:
        hook.remove()
    return [*out.hidden_states[:-1], captured[-1]], out


def check_tokens(model, tokens, seq_len):
    if len(tokens) < seq_len:
        raise PipelineError(f"lens needs at least {seq_len} tokens, got {len(tokens)}")
    vocab = model.get_input_embeddings().num_embeddings
    if int(tokens.max()) >= vocab:
        raise PipelineError(f"token id {int(tokens.max())} is outside the model's vocabulary of {vocab}")


def token_windows(tokens, starts, seq_len, device):
    """Token windows tokens[s : s + seq_len] for each start: -> (len(starts), seq_len) int64."""
    return torch.from_numpy(np.stack([np.asarray(tokens[s : s + seq_len], dtype=np.int64) for s in starts])).to(device)

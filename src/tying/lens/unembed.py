"""A causal LM's frozen readout (final norm, then unembedding) and the residual states it reads.

State indexing, used across the lens code: for a model with L blocks, state 0 is the
embedding output, state l (1 <= l <= L) is the output of block l, all *before* the final
norm. transformers' `hidden_states[-1]` is already normed in every supported family, so
state L is taken from the final norm's input instead; the readout of state L is then
exactly the model's logits.
"""
import sys

import numpy as np
import torch

from tying.errors import PipelineError
from tying.runtime import resolve_device
from tying.train.models import DTYPES

FINAL_NORM = {  # config.model_type -> the final norm's module path
    "olmo": "model.norm",
    "llama": "model.norm",
    "qwen3": "model.norm",
    "gpt_neox": "gpt_neox.final_layer_norm",
    "gpt2": "transformer.ln_f",
    "gpt_neo": "transformer.ln_f",
}


def lens_placement(device, dtype):
    """(device, dtype) the lens runs its frozen model in, for the config's `lens.device`, `lens.dtype`.

    "auto" is CUDA when present; when it falls back to the CPU, bfloat16 becomes float32, said on
    stderr (the job's log), since a CPU without native bfloat16 instructions emulates it, slower than
    float32. An explicit "cpu" keeps bfloat16 (faster than float32 on CPUs with those instructions).
    """
    resolved = resolve_device(device)
    if device == "auto" and resolved == "cpu" and dtype == "bfloat16":
        print("lens: no GPU, so lens.dtype bfloat16 runs as float32 on the CPU "
              "(set lens.device: cpu to keep bfloat16)", file=sys.stderr, flush=True)
        return resolved, "float32"
    return resolved, dtype


def product_dtype(name, device):
    """The dtype the lens's training products run in, for the config's `lens.train_dtype` on `device`:
    "auto" is bfloat16 where products in it are native (CUDA; a CPU with AVX512-BF16 or AMX), else float32
    (a CPU without them emulates bfloat16, slower than float32)."""
    if name != "auto":
        return DTYPES[name]
    native = torch.device(device).type == "cuda" or torch.cpu._is_avx512_bf16_supported() \
        or torch.cpu._is_amx_tile_supported()
    return torch.bfloat16 if native else torch.float32


def final_norm(model):
    """The norm applied to the last residual state before the unembedding."""
    kind = model.config.model_type
    if kind not in FINAL_NORM:
        raise PipelineError(f"no lens readout for model type {kind!r}; supported: {sorted(FINAL_NORM)}")
    return model.get_submodule(FINAL_NORM[kind])


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
    autograd, so gradients reach the translators) and the unembedding's weight (V, d) and bias (V or
    None), used directly in products over many states' rows at once; with `dtype`, those products run
    in it (a copy of the weight and bias in that dtype)."""

    def __init__(self, model, dtype=None):
        head = model.get_output_embeddings()
        self.norm, self.weight, self.bias = final_norm(model), head.weight, head.bias
        if dtype is not None:
            self.weight, self.bias = (None if t is None else t.to(dtype) for t in (self.weight, self.bias))

    def logits(self, z):
        """Logits of normed states: (..., d) -> (..., V), in float32 (a float32 model's: no copy)."""
        return torch.nn.functional.linear(z.to(self.weight.dtype), self.weight, self.bias).float()

    def state_gradient(self, grad_logits):
        """dL/dz from dL/d(logits): (..., V) -> (..., d), in the products' dtype (one 2-D product: a batched
        one runs slower on the CPU)."""
        grad = grad_logits.to(self.weight.dtype)
        return (grad.reshape(-1, grad.shape[-1]) @ self.weight).reshape(*grad.shape[:-1], -1)


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


"""The transformers causal LMs the pipeline trains (OLMo by default, GPT-NeoX, Llama, Qwen3), and a trained
one loaded frozen for analysis."""

import zlib
from collections import defaultdict

import torch
from transformers import (
    AutoModelForCausalLM,
    GPTNeoXConfig,
    GPTNeoXForCausalLM,
    LlamaConfig,
    LlamaForCausalLM,
    OlmoConfig,
    OlmoForCausalLM,
    Qwen3Config,
    Qwen3ForCausalLM,
)

from tying.checkpoints.checkpoint_files import verify
from tying.errors import PipelineError
from tying.runtime import resolve_device
from tying.train.initialisation import initialise

FAMILIES = {
    "olmo": (OlmoConfig, OlmoForCausalLM),
    "gpt_neox": (GPTNeoXConfig, GPTNeoXForCausalLM),
    "llama": (LlamaConfig, LlamaForCausalLM),
    "qwen3": (Qwen3Config, Qwen3ForCausalLM),
}


def model_config(
    family, *, vocab_size, hidden_size, layers, heads, seq_len, tied, eos_id, intermediate_size=None, clip_qkv=None
):
    """The transformers config of one family at the given size; tying per `tied`; clip_qkv (OLMo only):
    queries, keys and values clamped to [-clip_qkv, clip_qkv]."""
    config_cls, _ = FAMILIES[family]
    # Qwen3Config defaults to 32 key-value heads and a head_dim of 128 whatever the size; the others derive theirs.
    extra = {"head_dim": hidden_size // heads, "num_key_value_heads": heads} if family == "qwen3" else {}
    if clip_qkv is not None:  # tying.plan.recipes.clip_qkv has checked the family
        extra["clip_qkv"] = clip_qkv
    return config_cls(
        **extra,
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=intermediate_size or 4 * hidden_size,
        max_position_embeddings=seq_len,
        tie_word_embeddings=tied,
        bos_token_id=eos_id,
        eos_token_id=eos_id,
        pad_token_id=None,
    )


def run_config(spec):
    """The transformers config of a training run's spec (tying.plan.run_spec.RunSpec)."""
    return model_config(
        spec.family,
        vocab_size=spec.vocab_size,
        hidden_size=spec.hidden_size,
        layers=spec.layers,
        heads=spec.heads,
        seq_len=spec.seq_len,
        tied=spec.tied,
        eos_id=spec.eos_id,
        intermediate_size=spec.intermediate_size,
        clip_qkv=spec.clip_qkv,
    )


def init_seed(seed, tied, offset=0):
    """Initialisation seed: replicates differ, and tied and untied runs of one seed start from
    different random matrices (as the paper's released pairs do); tied variants share theirs. A nonzero
    `offset` (a variant's init_offset) draws another start for the same seed, whose batches stay the seed's."""
    return zlib.crc32(f"init:{seed}:{'tied' if tied else 'untied'}{f':{offset}' if offset else ''}".encode())


def build_model(config, seed, init="hf"):
    """A freshly initialised model for `config`, its matrices drawn by the scheme `init`
    (tying.train.initialisation), deterministic in `seed`."""
    _, model_cls = FAMILIES[config.model_type]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return initialise(model_cls(config), init)


def embedding_names(model):
    """Parameter names of the input embedding and the output projection (one tensor when tied)."""
    names = defaultdict(list)
    for name, p in model.named_parameters(remove_duplicate=False):
        names[id(p)].append(name)
    return (names[id(model.get_input_embeddings().weight)][0], names[id(model.get_output_embeddings().weight)][-1])


DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}  # a frozen model's


def frozen_model(path, *, device="cpu", dtype="float32"):
    """Load a `save_pretrained` directory, its weight files verified, as an eval-mode causal LM with no
    trainable parameters.

    device: "cpu", "cuda" or "auto" (CUDA when present); dtype: "float32" or "bfloat16".
    """
    if dtype not in DTYPES:
        raise PipelineError(f"model dtype must be one of {sorted(DTYPES)}, got {dtype!r}")
    device = resolve_device(device)
    verify(path)
    try:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=DTYPES[dtype])
    except (OSError, ValueError) as err:
        raise PipelineError(f"cannot load a causal LM from {path}: {err}") from err
    return model.to(device).eval().requires_grad_(False)

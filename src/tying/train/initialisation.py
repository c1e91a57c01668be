"""Each model family's published initialisation, applied to a freshly built transformers model.

- "olmo": OLMo's `init_fn: mitchell`, which the paper authors' OLMo configs set (OLMo's olmo/model.py): every
  matrix from a normal truncated at TRUNCATION std; std 1/sqrt(d) for the token embedding, an untied output
  projection, q, k, v and the MLP's gate and up projections; block i's (from 0) attention output
  1/sqrt(2 d (i+1)) and MLP output 1/sqrt(2 ff (i+1)), ff the MLP width.
- "gpt_neox": Pythia's `init_method: small_init` and `output_layer_init_method: wang_init` (GPT-NeoX): plain
  normals, std sqrt(2 / (5 d)) for every matrix but each block's two output projections, whose std is
  2 / (L sqrt(d)), L the number of blocks.
- "hf": transformers' own `_init_weights` as the model was built (a normal of std initializer_range, 0.02).

Norm weights and biases keep transformers' ones and zeros in every scheme. Which scheme a family uses by
default: tying.plan.recipes.
"""

import math
import re

import torch

from tying.errors import PipelineError

TRUNCATION = 3.0  # OLMo's init_cutoff_factor under mitchell: |w| <= 3 std


def _input_std(d, ff, layers, i):
    return 1 / math.sqrt(d)


def _small_init(d, ff, layers, i):
    return math.sqrt(2 / (5 * d))


def _wang_init(d, ff, layers, i):
    return 2 / (layers * math.sqrt(d))


# scheme -> (truncation in std, or None; {module name: std(d, ff, layers, block index)})
RULES = {
    "olmo": (
        TRUNCATION,
        {
            **dict.fromkeys(
                ["embed_tokens", "lm_head", "q_proj", "k_proj", "v_proj", "gate_proj", "up_proj"], _input_std
            ),
            "o_proj": lambda d, ff, layers, i: 1 / math.sqrt(2 * d * (i + 1)),
            "down_proj": lambda d, ff, layers, i: 1 / math.sqrt(2 * ff * (i + 1)),
        },
    ),
    "gpt_neox": (
        None,
        {
            **dict.fromkeys(["embed_in", "lm_head", "query_key_value", "dense_h_to_4h"], _small_init),
            **dict.fromkeys(["dense", "dense_4h_to_h"], _wang_init),
        },
    ),
}


def matrix_stds(model, scheme):
    """{parameter name: (std, truncation in std or None)} of every matrix `scheme` draws; {} for "hf".

    A tied model's output projection is its embedding, drawn once under the embedding's name.
    """
    if scheme == "hf":
        return {}
    truncation, rules = RULES[scheme]
    c = model.config
    out = {}
    for name, p in model.named_parameters():
        if p.ndim < 2:
            continue
        module = name.rsplit(".", 2)[-2]
        if module not in rules:
            raise PipelineError(f"initialisation {scheme!r} has no rule for {name} of a {c.model_type} model")
        block = re.search(r"layers\.(\d+)\.", name)
        std = rules[module](c.hidden_size, c.intermediate_size, c.num_hidden_layers, int(block[1]) if block else 0)
        out[name] = (std, truncation)
    return out


@torch.no_grad()
def initialise(model, scheme):
    """Redraw `model`'s matrices by `scheme` from torch's global generator, in parameter order."""
    for name, (std, truncation) in matrix_stds(model, scheme).items():
        p = model.get_parameter(name)
        if truncation is None:
            torch.nn.init.normal_(p, 0.0, std)
        else:
            torch.nn.init.trunc_normal_(p, 0.0, std, -truncation * std, truncation * std)
    return model

"""Each model family's published training choices that a run takes when its config says `auto`
(docs/methods.md, "Training recipe").

model.init picks how a run's matrices are drawn (tying.train.initialisation): OLMo's and GPT-NeoX's own
schemes, or transformers' default; Llama and Qwen3 publish no recipe, so they keep transformers'.
model.clip_qkv clamps OLMo's queries, keys and values: the paper authors' OLMo configs (1B and 20M) set 8.0.
"""

from tying.errors import PipelineError

INIT_SCHEMES = ("olmo", "gpt_neox", "hf")
FAMILY_INIT = {"olmo": "olmo", "gpt_neox": "gpt_neox", "llama": "hf", "qwen3": "hf"}
FAMILY_CLIP_QKV = {"olmo": 8.0}


def init_scheme(family, init):
    """The scheme a run of `family` draws its weights by: `init`, or the family's own for "auto"."""
    scheme = FAMILY_INIT[family] if init == "auto" else init
    if scheme not in INIT_SCHEMES:
        raise PipelineError(f"model.init: must be auto or one of {', '.join(INIT_SCHEMES)}, got {init!r}")
    return scheme


def clip_qkv(family, value):
    """The q, k, v clamp of a run of `family`: `value`, the family's own for "auto" (None: no clamp)."""
    if value == "auto":
        return FAMILY_CLIP_QKV.get(family)
    if value is not None and family not in FAMILY_CLIP_QKV:
        raise PipelineError(
            f"model.clip_qkv: only the OLMo family clamps q, k and v; set it to auto or null for {family}"
        )
    return value

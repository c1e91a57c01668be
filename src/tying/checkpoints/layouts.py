"""Which stored tensors are a checkpoint's input embedding and output projection, read from its safetensors
header and config.json alone.

Free of torch: the workflow's memory requests read them while the DAG is planned (tying.plan.memory), and
the embedding reader tries this before it asks transformers (tying.checkpoints.embedding_names), which costs
seconds of imports. The reading is structural, not a table of names: the embedding matrices are the 2-D
tensors with one row per vocabulary entry (config's vocab_size); of two such, the output projection is the
causal LM's own top-level module (`lm_head.weight`, `embed_out.weight`) and the input embedding lies inside
its base model (`model.embed_tokens.weight`, `transformer.wte.weight`, `model.decoder.embed_tokens.weight`).
A checkpoint of one tensor whose config states its tying (a control, tying.checkpoints.controls) holds
just its input embedding.
"""

from tying.errors import PipelineError

# Input-embedding and output-projection names of the released checkpoints the hub fetch copies without
# reading their config first (tying.hub.fetch); a control is written under the first input name.
LAYOUTS = (
    ("model.embed_tokens.weight", "lm_head.weight"),  # OLMo, Llama, Qwen
    ("gpt_neox.embed_in.weight", "embed_out.weight"),  # GPT-NeoX, Pythia
    ("transformer.wte.weight", "lm_head.weight"),  # GPT-Neo, GPT-2
)


def vocab_size(config):
    """The vocabulary size config.json states (a multimodal config's text part), or None."""
    return config.get("text_config", config).get("vocab_size")


def header_embedding_names(shapes, config):
    """(input name, output name or None) from `shapes` ({tensor name: shape}, every stored tensor) and the
    config.json dict, or None when the header does not settle it (no vocabulary-sized 2-D tensor, more than
    two, or two that are both top-level or both nested). The vocabulary size is the config's, else the rows of
    the one top-level matrix (the head) when there is one."""
    if len(shapes) == 1 and "tie_word_embeddings" in config:
        return next(iter(shapes)), None
    top = [shape[0] for name, shape in shapes.items() if len(shape) == 2 and name.count(".") == 1]
    rows = vocab_size(config) or (top[0] if len(top) == 1 else None)
    found = [name for name, shape in shapes.items() if len(shape) == 2 and shape[0] == rows]
    if rows is None or not 1 <= len(found) <= 2:
        return None
    if len(found) == 1:
        return found[0], None
    top = [name for name in found if name.count(".") == 1]
    if len(top) != 1:
        return None
    return next(name for name in found if name != top[0]), top[0]


def stored_embedding_shapes(shapes, config):
    """[shape] of the input matrix, then the output matrix when stored apart, from a header (as
    `header_embedding_names` reads it; a lone tensor is the input matrix whatever the config says) and the
    config.json dict ({} when there is none); PipelineError when the header does not settle which they are."""
    names = tuple(shapes) if len(shapes) == 1 else header_embedding_names(shapes, config)
    if names is None:
        raise PipelineError("the safetensors header does not tell which tensors are the embeddings")
    return [tuple(shapes[name]) for name in names if name is not None]

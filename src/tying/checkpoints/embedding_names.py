"""The stored names of a checkpoint's input embedding and output projection, as its model says.

The safetensors header usually settles them by structure alone (tying.checkpoints.layouts); where it does
not, the model is built from its config on the meta device (no memory, no weights read) and its
`get_input_embeddings()` / `get_output_embeddings()` modules are looked up by name, so any causal LM
transformers knows is read without a table of families.
"""

import torch

from tying.checkpoints.layouts import header_embedding_names
from tying.checkpoints.safetensors_ranges import read_header
from tying.errors import PipelineError


def embedding_names(model_dir, config, files):
    """(input name, output name or None when not stored apart) of the checkpoint in `model_dir`, whose
    config.json is the dict `config` and whose tensors `files` maps to the weight files holding them.

    The header's reading, unless it finds no output matrix in a checkpoint whose config does not say it is
    tied: the model then names the output matrix it expects (or says it has none), and the header's reading
    stands only when transformers cannot build the model."""
    names = header_embedding_names(_shapes(files), config)
    if names is not None and (names[1] is not None or config.get("tie_word_embeddings")):
        return names
    try:
        return model_embedding_names(model_dir, files)
    except PipelineError:
        if names is None:
            raise
        return names


def model_embedding_names(model_dir, stored):
    """(input name, output name or None) of the model's embedding modules' weights, as `stored` names them:
    each stored name is renamed as transformers' loading renames it (GPT-NeoX's embed_out is its lm_head;
    some checkpoints store the base model's tensors without its prefix) and matched to the modules'."""
    from transformers.conversion_mapping import get_model_conversion_mapping
    from transformers.core_model_loading import WeightConverter, WeightRenaming, rename_source_key

    model = meta_model(model_dir)
    transforms = get_model_conversion_mapping(model)
    renamings = [t for t in transforms if isinstance(t, WeightRenaming)]
    converters = [t for t in transforms if isinstance(t, WeightConverter)]
    meta = model.state_dict()
    loaded = {rename_source_key(name, renamings, converters, model.base_model_prefix, meta)[0]: name for name in stored}
    modules = {id(module): name for name, module in model.named_modules(remove_duplicate=False)}
    found = [
        None if module is None else loaded.get(f"{modules[id(module)]}.weight")
        for module in (model.get_input_embeddings(), model.get_output_embeddings())
    ]
    if found[0] is None:
        raise PipelineError(
            f"{model_dir}: no known input-embedding tensor (its {model.config.model_type} model's "
            f"{modules[id(model.get_input_embeddings())]}.weight is not stored)"
        )
    return tuple(found)


def meta_model(model_dir):
    """The causal LM of `model_dir`'s config on the meta device (nothing allocated, no weight read)."""
    from transformers import AutoConfig, AutoModelForCausalLM  # here: the header settles most checkpoints

    try:
        config = AutoConfig.from_pretrained(model_dir)
        with torch.device("meta"):
            return AutoModelForCausalLM.from_config(config)
    except (ValueError, KeyError) as error:
        raise PipelineError(
            f"{model_dir}: no known input-embedding tensor (the header does not settle it, and "
            f"transformers builds no causal LM from its config: {str(error).splitlines()[0]})"
        ) from None


def _shapes(files):
    """{tensor name: shape} of every stored tensor, from safetensors headers or a pytorch_model.bin
    (memory-mapped: no tensor data read)."""
    shapes = {}
    for path in dict.fromkeys(files.values()):
        if path.name.endswith(".bin"):
            try:
                tensors = torch.load(path, map_location="cpu", mmap=True, weights_only=True)
            except RuntimeError:  # a legacy, pre-zip file cannot be mapped
                tensors = torch.load(path, map_location="cpu", weights_only=True)
            shapes |= {name: list(t.shape) for name, t in tensors.items()}
            continue
        with open(path, "rb") as f:
            tensors, _, _ = read_header(f, str(path))
        shapes |= {name: entry["shape"] for name, entry in tensors.items()}
    return {name: shape for name, shape in shapes.items() if name in files}

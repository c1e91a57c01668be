"""Checks of a pair's local models from their files alone, before any job: a directory with a config.json and
weights, tied or untied as its role needs, a tokenizer, enough token strings shared within the pair, and given
lenses as wide and deep as their model."""

import json
from pathlib import Path

from tying.checkpoints.checkpoint_files import stored_tensors
from tying.checkpoints.layouts import LAYOUTS, vocab_size
from tying.checkpoints.lens_folder import read_lens_config
from tying.checkpoints.tokenizer_files import folder_tokens
from tying.checkpoints.unembedding_hash import stored_unembedding_hashes
from tying.errors import PipelineError
from tying.plan.references import reference
from tying.plan.runs import model_dims


def check_local(where, ref, tied, control=False, tokenizer_key=None):
    """A local model `ref` (tying.plan.references.Local) at `where` (a config key): a directory holding a
    config.json and weights, tied when `tied` and untied otherwise, as far as its files say without loading it
    (local_tying), and a tokenizer (its tokenizer_dir; the key of a `tokenizer:` folder is `tokenizer_key`, by
    default beside `where`). Returns (its token strings by id, its rows: config.json's vocab_size)."""
    directory = Path(ref.path)
    if not directory.is_dir():
        raise PipelineError(f"{where}: no directory {directory}")
    model_config = read_model_config(where, directory)
    try:
        stored = stored_tensors(directory)
    except PipelineError as err:
        raise PipelineError(f"{where}: {err}") from None
    tied_here = local_tying(model_config, stored)
    if tied_here is not None and tied_here != tied:
        said = "config.json's tie_word_embeddings" if "tie_word_embeddings" in model_config else "its stored tensors"
        raise PipelineError(
            f"{where}: {directory} is {'a tied' if tied_here else 'an untied'} model ({said}), but "
            f"its role needs {'a tied' if tied else 'an untied'} one"
            + (" (a control's tied role is an untied model)" if control else "")
        )
    try:
        tokens = folder_tokens(ref.tokenizer_dir)
    except PipelineError as err:
        key = (tokenizer_key or where.rsplit(".", 1)[0] + ".tokenizer") if ref.tokenizer else where
        raise PipelineError(f"{key}: {err}") from None
    return tokens, vocab_size(model_config)


def check_shared_tokens(config, local, names):
    """Each pair of local models among `names` (the pairs a target reads) shares at least
    analysis.min_shared_tokens token strings, and more than analysis.knn_k (its members are compared on the strings
    both tokenizers hold: tying.checkpoints.embeddings.shared_tokens); `local`: {(pair, role): check_local's
    result}. Returns a line per pair saying how many."""
    analysis, lines = config["analysis"], []
    least = max(analysis["min_shared_tokens"], analysis["knn_k"] + 1)
    for name in names:
        if (name, "tied") not in local or (name, "untied") not in local:
            continue
        sets = {role: set(local[name, role][0]) - {None} for role in ("tied", "untied")}
        shared = len(sets["tied"] & sets["untied"])
        sizes = "; ".join(
            f"{role} {len(sets[role]):,} tokens" + (f" in {rows:,} rows" if rows else "")
            for role, rows in ((r, local[name, r][1]) for r in ("tied", "untied"))
        )
        if shared < least:
            raise PipelineError(
                f"pairs.{name}: its models share {shared:,} token strings ({sizes}), fewer than the "
                f"{least:,} the analyses need (analysis.min_shared_tokens, and knn_k + 1)"
            )
        lines.append(
            f"pair {name!r}: its models share {shared:,} token strings ({sizes}); every table of the pair "
            "compares them on those"
        )
    return lines


def check_given_lens(config, name, pair):
    """A pair's given lenses (`lens: {role: DIR}`): tuned-lens folders as wide and deep as their model, where the
    config can know it (a trained run's architecture, a local model's config.json; a hub model's the lens job
    checks), and made for a local model's very unembedding where the lens states its hash (the hash of the
    stored output matrix under any dtype the model may have been loaded in; the lens job checks the rest)."""
    for role, path in pair["lens"].items():
        where = f"pairs.{name}.lens.{role}"
        if role not in pair:
            raise PipelineError(f"{where}: the pair has no {role} model")
        try:
            lens = read_lens_config(path)
        except PipelineError as err:
            raise PipelineError(f"{where}: {err}") from None
        ref = reference(pair[role])
        if ref.trained:
            dims = model_dims(config, ref.arch)
            model = dims["hidden_size"], dims["layers"]
        elif ref.local:
            model_config = read_model_config(f"pairs.{name}.{role}.path", Path(ref.path))
            text = model_config.get("text_config") or model_config
            model = text.get("hidden_size"), text.get("num_hidden_layers")
        else:
            continue
        if None not in model and (lens["d_model"], lens["num_hidden_layers"]) != model:
            raise PipelineError(
                f"{where}: {path} is a lens for d_model {lens['d_model']} and "
                f"{lens['num_hidden_layers']} layers; the {role} model has d_model {model[0]} and "
                f"{model[1]} layers"
            )
        if ref.local and lens.get("unembed_hash"):
            hashes = stored_unembedding_hashes(ref.path, tied=role == "tied" and "control" not in pair)
            if hashes and lens["unembed_hash"] not in hashes.values():
                raise PipelineError(
                    f"{where}: {path} is a lens for another model's unembedding (its unembed_hash "
                    f"is not that of {ref.path}'s output matrix)"
                )


def read_model_config(where, directory):
    """The config.json of a local model directory, as a dict (a one-line error naming `where` otherwise)."""
    path = directory / "config.json"
    if not path.is_file():
        raise PipelineError(f"{where}: {directory} holds no config.json (not a directory save_pretrained wrote)")
    try:
        return json.loads(path.read_text())
    except ValueError:
        raise PipelineError(f"{where}: {path} is not valid JSON") from None


def local_tying(model_config, stored):
    """Whether a local model is tied, from its config.json (`model_config`, the tie_word_embeddings it states,
    its text_config's for a multimodal model) or else its `stored` tensor names (tied: an input embedding and
    no output matrix); None when neither says (a single pytorch_model.bin without the key: the embeddings job
    reads it)."""
    for section in (model_config, model_config.get("text_config") or {}):
        if "tie_word_embeddings" in section:
            return bool(section["tie_word_embeddings"])
    for in_name, out_name in LAYOUTS:
        if stored is not None and in_name in stored:
            return out_name not in stored
    return None

"""Read a model's token embedding and output matrices straight from its safetensors.

No model is instantiated: only the one or two tensors needed are read, in float32, by default
trimmed to the tokenizer's real vocabulary (OLMo pads 50280 rows to 50304); `rows="matrix"`
keeps every stored row, as the paper authors' scripts do.
"""

import json
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open

from tying.checkpoints.checkpoint_files import BIN, stored_tensors, verify
from tying.checkpoints.embedding_names import embedding_names
from tying.checkpoints.tokenizer_files import TOKENIZER_FILE, read_tokens
from tying.errors import PipelineError

ROWS = ("tokenizer", "matrix")


@dataclass(frozen=True)
class Embeddings:
    """A model's embedding matrices over its real vocabulary.

    input, output: (V, d) float32; the same tensor object when `tied`.
    tokens: V token strings, tokens[i] the string of id i (None for an unused id or a padding row).
    """

    input: torch.Tensor
    output: torch.Tensor
    tied: bool
    tokens: tuple

    def select(self, ids):
        """The rows `ids` (n,) of both matrices, in that order; tying is kept."""
        ids = torch.as_tensor(ids, dtype=torch.long)
        inp = self.input[ids]
        out = inp if self.tied else self.output[ids]
        return Embeddings(inp, out, self.tied, tuple(self.tokens[i] for i in ids.tolist()))


def load_embeddings(model_dir, rows="tokenizer", tokenizer=None):
    """Embeddings of the `save_pretrained`-style directory `model_dir`, its weight files verified first.

    rows: "tokenizer" keeps the tokenizer's ids; "matrix" every stored row, the rows past the
    tokenizer's ids (padding) with token None. tokenizer: the folder holding the model's tokenizer.json
    (default `model_dir`; a local model's `tokenizer:` key).
    Tied when transformers' config says `tie_word_embeddings` (the value config.json states, else
    its model_type's class default) or no output tensor is stored.
    """
    if rows not in ROWS:
        raise PipelineError(f"rows must be one of {', '.join(ROWS)}, got {rows!r}")
    model_dir = Path(model_dir)
    config = _read_json(model_dir / "config.json")
    tokens = read_tokens(Path(tokenizer or model_dir) / TOKENIZER_FILE)
    verify(model_dir)
    files = _tensor_files(model_dir)
    in_name, out_name = embedding_names(model_dir, config, files)
    says_tied = _config_ties(model_dir, config)
    tied = bool(says_tied) or out_name not in files
    if tied and says_tied is False:
        raise PipelineError(f"{model_dir}: config says untied but no {out_name or 'output projection'} is stored")
    inp = _read_rows(files[in_name], in_name, len(tokens), every_row=rows == "matrix")
    out = inp if tied else _read_rows(files[out_name], out_name, len(inp), every_row=False)
    return Embeddings(inp, out, tied, tokens + (None,) * (len(inp) - len(tokens)))


def shared_tokens(tokens_a, tokens_b):
    """Row indices of the token strings both vocabularies hold.

    Returns idx_a, idx_b: (n,) long, tokens_a[idx_a[j]] == tokens_b[idx_b[j]], in increasing
    idx_a order. A string held by several ids counts at its lowest id.
    """
    first_b = {}
    for i, token in enumerate(tokens_b):
        if token is not None:
            first_b.setdefault(token, i)
    pairs, seen = [], set()
    for i, token in enumerate(tokens_a):
        if token in first_b and token not in seen:
            seen.add(token)
            pairs.append((i, first_b[token]))
    idx = torch.tensor(pairs, dtype=torch.long).reshape(-1, 2)
    return idx[:, 0], idx[:, 1]


def one_tokenizer(a, b):
    """True when `a` and `b` give the same token strings to the same ids: one tokenizer, whatever
    number of padded rows (token None, kept by rows "matrix") each matrix stores past it."""
    return _tokenizer_part(a.tokens) == _tokenizer_part(b.tokens)


def common_vocabulary(a, b):
    """`a` and `b` restricted to the token strings they share, rows aligned.

    Returns (a', b', ids): ids (n,) are a's token ids of the rows. One tokenizer (one_tokenizer):
    compared by id on the rows both store, unchanged when both store the same rows; two
    tokenizers: on the strings both vocabularies hold.
    """
    if a.tokens == b.tokens:
        return a, b, torch.arange(len(a.tokens))
    if one_tokenizer(a, b):
        ids = torch.arange(min(len(a.tokens), len(b.tokens)))
        return a.select(ids), b.select(ids), ids
    idx_a, idx_b = shared_tokens(a.tokens, b.tokens)
    return a.select(idx_a), b.select(idx_b), idx_a


def _tokenizer_part(tokens):
    """`tokens` without the trailing padded rows (None)."""
    end = len(tokens)
    while end and tokens[end - 1] is None:
        end -= 1
    return tokens[:end]


def compared_rows(untied, tied, keep=None):
    """Both models on the token strings they share, then (if `keep`) on the ids `keep`.

    Returns (untied, tied, ids): ids (n,) are the untied model's token ids of the rows. A subset
    needs one shared vocabulary; fewer than 2 rows is a PipelineError.
    """
    untied, tied, ids = common_vocabulary(untied, tied)
    if keep is not None:
        if not torch.equal(ids, torch.arange(len(ids))):
            raise PipelineError("a token subset needs the two models to share one vocabulary")
        ids = torch.as_tensor(keep, dtype=torch.long)
        untied, tied = untied.select(ids), tied.select(ids)
    if len(ids) < 2:
        raise PipelineError(f"a comparison needs at least 2 tokens, got {len(ids)}")
    return untied, tied, ids


def _read_json(path):
    if not path.is_file():
        raise PipelineError(f"missing {path}")
    return json.loads(path.read_text())


def _config_ties(model_dir, config):
    """tie_word_embeddings as transformers reads `config` (config.json of `model_dir`): the value it
    states, else its model_type's class default (True for GPT-Neo); None when neither is known."""
    if "tie_word_embeddings" in config or "model_type" not in config:
        return config.get("tie_word_embeddings")
    from transformers import CONFIG_MAPPING, AutoConfig  # only here: importing transformers takes seconds

    if config["model_type"] not in CONFIG_MAPPING:
        return None
    return bool(AutoConfig.from_pretrained(model_dir).get_text_config().tie_word_embeddings)


def _tensor_files(model_dir):
    """Tensor name -> the weight file holding it (checkpoint_files.stored_tensors), a single pytorch_model.bin's
    names read by torch."""
    files = stored_tensors(model_dir)
    if files is None:
        path = model_dir / BIN
        return dict.fromkeys(_bin_tensors(path), path)
    return files


def _bin_tensors(path):
    """The tensors of a pytorch_model.bin memory-mapped, so only the rows sliced are read (a legacy, pre-zip
    file cannot be mapped: read whole)."""
    try:
        return torch.load(path, map_location="cpu", mmap=True, weights_only=True)
    except RuntimeError:
        try:
            return torch.load(path, map_location="cpu", weights_only=True)
        except Exception as error:
            raise PipelineError(f"{path}: unreadable pytorch_model.bin ({type(error).__name__})") from None


def _read_rows(path, name, vocab, every_row):
    """Tensor `name` in `path` as float32 (n, d): its first `vocab` rows, or (`every_row`) all of them."""
    if path.name.endswith(".bin"):
        tensor = _bin_tensors(path)[name]
        return _rows(tensor, path, name, len(tensor), vocab, every_row)
    with _open(path) as f:
        tensor = f.get_slice(name)
        return _rows(tensor, path, name, tensor.get_shape()[0], vocab, every_row)


def _rows(tensor, path, name, rows, vocab, every_row):
    """The first `vocab` of the `rows` rows of `tensor` (every one with `every_row`) as contiguous float32."""
    if rows < vocab:
        raise PipelineError(f"{path}: {name} has {rows} rows, fewer than the {vocab} needed")
    return tensor[: rows if every_row else vocab].to(torch.float32).contiguous()


@contextmanager
def _open(path):
    """safe_open(path), its errors (a damaged file) as one-line PipelineErrors."""
    try:
        with safe_open(path, framework="pt") as f:
            yield f
    except SafetensorError as error:
        raise PipelineError(f"{path}: unreadable safetensors file ({error})") from None

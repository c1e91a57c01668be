"""A model folder's tokenizer as the embedding readers use it: its tokenizer.json, read by the tokenizers library
alone (no torch, no transformers), so the config check reads it before any job (tying.plan.checks) and the
embedding reader reads the same (tying.checkpoints.embeddings)."""

from pathlib import Path

from tying.errors import PipelineError

TOKENIZER_FILE = "tokenizer.json"
SLOW_FILES = ("vocab.json", "merges.txt", "tokenizer.model", "vocab.txt", "spiece.model")  # no tokenizer.json


def read_tokens(tokenizer_json):
    """Token strings by id, (V,) tuple, V = 1 + the largest id (added tokens included)."""
    from tokenizers import Tokenizer  # here: planning a DAG without local models imports none of it

    path = Path(tokenizer_json)
    if not path.is_file():
        raise PipelineError(f"missing tokenizer: {path}")
    try:
        vocab = Tokenizer.from_file(str(path)).get_vocab(with_added_tokens=True)
    except Exception as error:  # the tokenizers library raises its own exceptions on a malformed file
        raise PipelineError(f"{path}: not a tokenizer file ({str(error).splitlines()[0]})") from None
    tokens = [None] * (max(vocab.values()) + 1)
    for token, i in vocab.items():
        tokens[i] = token
    return tuple(tokens)


def folder_tokens(folder):
    """Token strings by id of the tokenizer in `folder`: read_tokens of its tokenizer.json, and a one-line
    PipelineError naming the folder, and what to do, when it holds none."""
    folder = Path(folder)
    if not (folder / TOKENIZER_FILE).is_file():
        slow = [name for name in SLOW_FILES if (folder / name).is_file()]
        how = (
            f"only {', '.join(slow)}: AutoTokenizer.from_pretrained(DIR).save_pretrained(DIR) writes it"
            if slow
            else "save the model's tokenizer there with tokenizer.save_pretrained(DIR), or name a folder "
            "holding one with tokenizer: DIR beside path"
        )
        raise PipelineError(f"{folder} holds no {TOKENIZER_FILE}, the model's tokenizer ({how})")
    return read_tokens(folder / TOKENIZER_FILE)

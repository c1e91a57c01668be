"""Train a byte-level BPE tokenizer on the corpus, or take an existing one from the hub."""

import json
from pathlib import Path

from tokenizers import ByteLevelBPETokenizer
from transformers import PreTrainedTokenizerFast

from tying.errors import PipelineError
from tying.io import atomic_path

EOS = "<|endoftext|>"


def train_bpe(texts, vocab_size):
    """A PreTrainedTokenizerFast with a byte-level BPE of `vocab_size` entries (EOS included)."""
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(texts, vocab_size=vocab_size, min_frequency=2, special_tokens=[EOS], show_progress=False)
    return PreTrainedTokenizerFast(
        tokenizer_object=bpe._tokenizer, eos_token=EOS, bos_token=EOS, unk_token=EOS, model_max_length=1_000_000
    )


def pretrained(name):
    """The tokenizer `name`: a local folder's, else the hub's (needs the hub or a populated cache). A failure is
    one line saying where it was looked for and the underlying error's own message."""
    from transformers import AutoTokenizer  # here: its import costs 2.5 s more, and a trained BPE needs none

    where = f"in the local folder {name}" if Path(name).is_dir() else f"{name!r} from the hub"
    try:
        tok = AutoTokenizer.from_pretrained(name)
    except Exception as err:
        said = " ".join(str(err).split())  # its message on one line
        raise PipelineError(
            f"cannot load the tokenizer {where}: {type(err).__name__}" + (f": {said}" if said else "")
        ) from err
    if tok.eos_token is None:
        raise PipelineError(f"tokenizer {name!r} has no end-of-text token")
    return tok


def save(tok, directory):
    """Write the tokenizer as a save_pretrained directory, atomically."""
    with atomic_path(directory) as tmp:
        tok.save_pretrained(tmp)


def load(directory):
    """The tokenizer a `save` directory holds, as AutoTokenizer loads it. A trained BPE's class is
    PreTrainedTokenizerFast itself (what AutoTokenizer would pick), loaded without AutoTokenizer, whose
    import costs 2.5 s more."""
    config = json.loads((Path(directory) / "tokenizer_config.json").read_text())
    if config.get("tokenizer_class") == PreTrainedTokenizerFast.__name__:
        return PreTrainedTokenizerFast.from_pretrained(directory)
    from transformers import AutoTokenizer  # here: as above

    return AutoTokenizer.from_pretrained(directory)

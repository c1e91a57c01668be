"""Token ids per split as flat memory-mapped arrays, and per-token frequency counts."""
import json
from pathlib import Path

import numpy as np
import pandas as pd

from tying.io import atomic_path, write_parquet


def dtype_for(vocab_size):
    """The smallest unsigned dtype holding every id."""
    return np.uint16 if vocab_size <= np.iinfo(np.uint16).max + 1 else np.uint32


def encode(tok, texts, batch=256):
    """Concatenate the ids of `texts`, each document followed by EOS: 1-D int64 array."""
    texts = list(texts)
    parts = []
    for i in range(0, len(texts), batch):
        for ids in tok(texts[i:i + batch], add_special_tokens=False)["input_ids"]:
            parts.append(np.asarray(ids + [tok.eos_token_id], dtype=np.int64))
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def write_ids(ids, path, vocab_size):
    """Write ids as a raw array of dtype_for(vocab_size), atomically."""
    with atomic_path(path) as tmp:
        ids.astype(dtype_for(vocab_size)).tofile(tmp)


def write_meta(path, vocab_size, eos_id, counts):
    """Sidecar describing the arrays: dtype, vocabulary size, EOS id and token count per split."""
    meta = {"dtype": np.dtype(dtype_for(vocab_size)).name, "vocab_size": vocab_size, "eos_id": eos_id,
            "tokens": counts}
    with atomic_path(path) as tmp:
        Path(tmp).write_text(json.dumps(meta, indent=1))


def load_ids(path, meta_path):
    """Memory-map a token array written by write_ids."""
    meta = json.loads(Path(meta_path).read_text())
    return np.memmap(path, dtype=meta["dtype"], mode="r")


def frequency_table(ids, tok):
    """Per-token counts over `ids`: columns token_id, token, count (every vocabulary id, zeros included)."""
    vocab_size = len(tok)
    counts = np.bincount(np.asarray(ids, dtype=np.int64), minlength=vocab_size)
    return pd.DataFrame({"token_id": np.arange(vocab_size),
                         "token": tok.convert_ids_to_tokens(list(range(vocab_size))),
                         "count": counts[:vocab_size]})


def tokenize_corpus(documents, tok, out_train, out_val, out_meta, out_counts):
    """Encode the train and validation documents and write arrays, sidecar and train-split counts."""
    vocab_size = len(tok)
    ids = {split: encode(tok, documents.loc[documents["split"] == split, "text"]) for split in ("train", "val")}
    write_ids(ids["train"], out_train, vocab_size)
    write_ids(ids["val"], out_val, vocab_size)
    write_parquet(frequency_table(ids["train"], tok), out_counts)
    write_meta(out_meta, vocab_size, tok.eos_token_id, {k: int(len(v)) for k, v in ids.items()})

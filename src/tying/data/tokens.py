"""Token ids per split as flat memory-mapped arrays, and per-token frequency counts.

A corpus shard is tokenized into its own arrays (`tokenize_documents`), streamed batch by
batch; `join_shards` lists the shards' arrays in a manifest per split, and `load_ids` reads a
manifest as one array across the shards (`ShardedIds`), so no stage holds the corpus in memory.
"""

import bisect
import json
import os
import sys
from contextlib import ExitStack
from pathlib import Path

import numpy as np

from tying.data.shards import read_batches
from tying.errors import PipelineError
from tying.io import atomic_path, write_parquet

SPLITS = ("train", "val")


def dtype_for(vocab_size):
    """The smallest unsigned dtype holding every id."""
    return np.uint16 if vocab_size <= np.iinfo(np.uint16).max + 1 else np.uint32


def encode(tok, texts, batch=256):
    """Concatenate the ids of `texts`, each document followed by EOS: 1-D int64 array."""
    texts = list(texts)
    parts = []
    for i in range(0, len(texts), batch):
        for ids in tok(texts[i : i + batch], add_special_tokens=False)["input_ids"]:
            parts.append(np.asarray(ids + [tok.eos_token_id], dtype=np.int64))
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def write_meta(path, vocab_size, eos_id, counts, shards=None):
    """Sidecar describing the arrays: dtype, vocabulary size, EOS id, token count per split and,
    for joined shards, the number of shards."""
    meta = {
        "dtype": np.dtype(dtype_for(vocab_size)).name,
        "vocab_size": vocab_size,
        "eos_id": eos_id,
        "tokens": counts,
        **({"shards": shards} if shards else {}),
    }
    with atomic_path(path) as tmp:
        Path(tmp).write_text(json.dumps(meta, indent=1))


class ShardedIds:
    """Several token arrays read as one: len() and contiguous slices across their boundaries.

    What `batches.train_batch`, `batches.eval_batches` and the lens index: ids[a:b] is an ndarray.
    """

    def __init__(self, parts):
        self.parts = [p for p in parts if len(p)]
        self.offsets = np.cumsum([0] + [len(p) for p in self.parts]).tolist()
        self.dtype = self.parts[0].dtype if self.parts else np.dtype(np.uint16)

    def __len__(self):
        return self.offsets[-1]

    def __getitem__(self, key):
        if not isinstance(key, slice) or key.step not in (None, 1):
            raise TypeError("ShardedIds takes contiguous slices only")
        start, stop, _ = key.indices(len(self))
        if start >= stop:
            return np.zeros(0, self.dtype)
        first = bisect.bisect_right(self.offsets, start) - 1
        pieces = []
        for i in range(first, len(self.parts)):
            lo = self.offsets[i]
            if lo >= stop:
                break
            pieces.append(self.parts[i][max(start - lo, 0) : stop - lo])
        return pieces[0] if len(pieces) == 1 else np.concatenate(pieces)

    def __array__(self, dtype=None, copy=None):
        whole = self[:]
        return whole if dtype is None else whole.astype(dtype)

    def max(self):
        return max(int(p.max()) for p in self.parts)


def load_ids(path, meta_path):
    """The token ids at `path`: a manifest (.json, from join_shards) read across its shards, else one
    array written by tokenize_documents, memory-mapped."""
    meta = json.loads(Path(meta_path).read_text())
    path = Path(path)
    if path.suffix != ".json":
        return np.memmap(path, dtype=meta["dtype"], mode="r")
    shards = json.loads(path.read_text())["shards"]
    return ShardedIds(
        [np.memmap(path.parent / s["path"], dtype=meta["dtype"], mode="r") for s in shards if s["tokens"]]
    )


def frequency_table(counts, tok):
    """Per-token counts (an array over the vocabulary): columns token_id, token, count."""
    import pandas as pd  # here: training reads token arrays through this module and needs no pandas

    vocab_size = len(tok)
    return pd.DataFrame(
        {
            "token_id": np.arange(vocab_size),
            "token": tok.convert_ids_to_tokens(list(range(vocab_size))),
            "count": counts[:vocab_size],
        }
    )


def tokenize_batches(batches, tok, out_train, out_val, out_meta, out_counts):
    """Encode DataFrames (text, split) one at a time, appending each split's ids to its array;
    then write the train-split counts and the sidecar. Memory: one batch and the counts."""
    vocab_size, dtype = len(tok), dtype_for(len(tok))
    counts = np.zeros(vocab_size, np.int64)
    n = dict.fromkeys(SPLITS, 0)
    with ExitStack() as stack:
        paths = {s: stack.enter_context(atomic_path(p)) for s, p in zip(SPLITS, (out_train, out_val))}
        files = {s: stack.enter_context(open(p, "wb")) for s, p in paths.items()}
        for batch in batches:
            for split in SPLITS:
                ids = encode(tok, batch.loc[batch["split"] == split, "text"])
                ids.astype(dtype).tofile(files[split])
                n[split] += len(ids)
                if split == "train":
                    counts += np.bincount(ids, minlength=vocab_size)[:vocab_size]
        write_parquet(frequency_table(counts, tok), out_counts)
        write_meta(out_meta, vocab_size, tok.eos_token_id, n)


def tokenize_documents(paths, tok, out_train, out_val, out_meta, out_counts):
    """Tokenize the documents Parquet files `paths` (streamed by row group) into one set of arrays."""
    tokenize_batches(read_batches(paths), tok, out_train, out_val, out_meta, out_counts)


def join_shards(arrays, metas, counts, out_train, out_val, out_meta, out_counts):
    """Join tokenized shards without copying them: a manifest per split listing each shard's array
    (path relative to the manifest) and token count, the train counts summed, a joint sidecar.

    arrays: {"train": [shard paths], "val": [...]}, metas and counts: the shards' sidecars and
    count tables, all in shard order.
    """
    metas = [json.loads(Path(p).read_text()) for p in metas]
    totals = {s: sum(m["tokens"][s] for m in metas) for s in SPLITS}
    for split in SPLITS:
        if not totals[split]:
            raise PipelineError(
                f"the corpus's {len(metas)} shard(s) hold no {split} tokens: "
                "too few documents for corpus.val_fraction"
            )
    for split, out in zip(SPLITS, (out_train, out_val)):
        shards = [
            {"path": os.path.relpath(path, Path(out).parent), "tokens": m["tokens"][split]}
            for path, m in zip(arrays[split], metas)
        ]
        with atomic_path(out) as tmp:
            Path(tmp).write_text(json.dumps({"shards": shards}, indent=1))
    import pandas as pd  # here: as above

    joint = pd.read_parquet(counts[0])
    for path in counts[1:]:
        joint["count"] += pd.read_parquet(path, columns=["count"])["count"].to_numpy()
    write_parquet(joint, out_counts)
    write_meta(out_meta, metas[0]["vocab_size"], metas[0]["eos_id"], totals, shards=len(metas))
    print(
        f"tokens: {totals['train']:,} train and {totals['val']:,} validation tokens in {len(metas)} shard(s)",
        file=sys.stderr,
        flush=True,
    )

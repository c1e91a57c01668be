"""Local corpora written as JSON lines, and the corpus -> tokens stages run on them in-process."""

import json

import numpy as np

from tying.data.shards import shard_documents, write_documents
from tying.data.tokens import join_shards, tokenize_documents

V = 500


def write_local_corpus(folder, n_files, docs_per_file, words=(5, 60), seed=0):
    """JSON lines files of documents made of words t1..t{V-1}; returns their paths."""
    rng = np.random.default_rng(seed)
    paths = []
    for f in range(n_files):
        path = folder / f"part{f}.jsonl"
        lines = [
            json.dumps({"text": " ".join(f"t{w}" for w in rng.integers(1, V, rng.integers(*words)))})
            for _ in range(docs_per_file)
        ]
        path.write_text("\n".join(lines) + "\n")
        paths.append(str(path))
    return paths


def build_tokens(corpus, folder, tok):
    """Run the corpus, tokens_shard and tokens stages of `corpus` into `folder`; the joined outputs."""
    shards = []
    for k in range(corpus["shards"]):
        out = {name: folder / f"shard{k}" / name for name in ("train.bin", "val.bin", "meta.json", "counts.parquet")}
        write_documents(shard_documents(corpus, k), folder / f"shard{k}.parquet", corpus["val_fraction"])
        tokenize_documents([folder / f"shard{k}.parquet"], tok, *out.values())
        shards.append(out)
    joined = {name: folder / name for name in ("train.json", "val.json", "meta.json", "counts.parquet")}
    join_shards(
        {split: [s[f"{split}.bin"] for s in shards] for split in ("train", "val")},
        [s["meta.json"] for s in shards],
        [s["counts.parquet"] for s in shards],
        *joined.values(),
    )
    return joined

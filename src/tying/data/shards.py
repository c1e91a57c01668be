"""The corpus in shards: each shard a contiguous block of the source, streamed to a Parquet file.

Shard k of n takes the k-th contiguous block of the source's parts: the dataset's data files for
`hf` (datasets' `IterableDataset.shard`), the listed files for `local`, the listed distributions
for `docstrings`; `stdlib` is one part.
Read in shard order, the shards give the same documents in the same order as one shard, so a
source read whole gives the same token stream whatever `corpus.shards` is. Documents are
written and read in row groups of bounded size: no stage holds the corpus in memory.
"""

import pyarrow as pa
import pyarrow.parquet as pq

from tying.data.corpus import docstring_documents, hf_documents, local_documents, split_of, stdlib_documents
from tying.errors import PipelineError
from tying.io import atomic_path

SCHEMA = pa.schema([("doc_id", pa.string()), ("text", pa.string()), ("split", pa.string())])
ROW_GROUP_BYTES = 32 * 2**20  # text per Parquet row group (the unit every reader holds at once)
ROW_GROUP_DOCS = 20_000


def block(items, n, index):
    """The `index`-th of `n` contiguous blocks of `items`; the first len % n blocks are one longer."""
    size, extra = divmod(len(items), n)
    start = index * size + min(index, extra)
    return items[start : start + size + (index < extra)]


def shard_documents(corpus, index):
    """Yield (doc_id, text) of shard `index` of the `corpus` config section's `shards`.

    hf: the shard's block of the dataset's files, up to max_tokens / shards words each.
    """
    n, source = corpus.get("shards", 1), corpus["source"]
    if source == "stdlib":
        return stdlib_documents()
    if source == "local":
        return local_documents(block(list(corpus["paths"]), n, index), corpus.get("text_field", "text"))
    if source == "docstrings":
        return docstring_documents(block(list(corpus["distributions"]), n, index))
    return hf_documents(
        corpus["path"],
        corpus.get("name"),
        corpus.get("split", "train"),
        corpus.get("revision"),
        corpus.get("text_field", "text"),
        -(-corpus["max_tokens"] // n),
        shard=(index, n),
    )


def write_documents(documents, path, val_fraction):
    """Stream (doc_id, text) pairs to Parquet (doc_id, text, split) in bounded row groups, atomically.

    Returns the number of documents per split; raises PipelineError when there is none.
    """
    counts = {"train": 0, "val": 0}
    with atomic_path(path) as tmp, pq.ParquetWriter(tmp, SCHEMA) as writer:
        rows, size = [], 0
        for doc_id, text in documents:
            split = split_of(doc_id, val_fraction)
            rows.append((doc_id, text, split))
            counts[split] += 1
            size += len(text)
            if size >= ROW_GROUP_BYTES or len(rows) >= ROW_GROUP_DOCS:
                writer.write_table(_table(rows))
                rows, size = [], 0
        if rows:
            writer.write_table(_table(rows))
        if not sum(counts.values()):
            raise PipelineError(f"corpus shard {path} has no documents")
    return counts


def _table(rows):
    doc_ids, texts, splits = zip(*rows)
    return pa.table([list(doc_ids), list(texts), list(splits)], schema=SCHEMA)


def read_batches(paths):
    """Yield each row group of the Parquet `paths`, in order, as a DataFrame (doc_id, text, split)."""
    for path in paths:
        parquet = pq.ParquetFile(path)
        for group in range(parquet.num_row_groups):
            yield parquet.read_row_group(group).to_pandas()


def read_texts(paths, split):
    """Yield the texts of `split` ("train" / "val") from the Parquet `paths`, streamed."""
    for batch in read_batches(paths):
        yield from batch.loc[batch["split"] == split, "text"]

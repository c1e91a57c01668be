"""The training corpus's sources as (doc_id, text) streams, and its deterministic train/validation split.

Sources: the Python standard library's own documentation (offline default), the docstrings of
named installed distributions (offline, larger), a Hugging Face dataset streamed up to a token
budget (offline: from the hub cache), or local text / JSON lines / Parquet files.
"""

import ast
import gc
import hashlib
import importlib.metadata
import json
import sysconfig
import zlib
from pathlib import Path

from tying.errors import PipelineError

SKIP_DIRS = {"test", "tests", "idlelib", "site-packages", "lib2to3", "__pycache__", "turtledemo"}


def stdlib_documents():
    """Yield (doc_id, text): the pydoc topics, then the docstrings of each stdlib source file."""
    from pydoc_data.topics import topics  # here: only the stdlib source reads it

    for name in sorted(topics):
        yield f"topic:{name}", topics[name].strip()
    root = Path(sysconfig.get_paths()["stdlib"])
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if SKIP_DIRS.intersection(rel.parts[:-1]) or rel.name.startswith("test_"):
            continue
        text = "\n\n".join(_docstrings(path))
        if text:
            yield f"module:{rel.as_posix()}", text


def docstring_documents(distributions):
    """Yield (doc_id, text): for each named installed distribution in turn, the docstrings of each of
    its .py source files (its RECORD's, in path order; tests skipped as for stdlib), one document a
    file. Read with `ast`, nothing imported: the same documents wherever the pinned versions are."""
    for name in distributions:
        dist = _distribution(name)
        for file in sorted((f for f in dist.files if f.suffix == ".py"), key=lambda f: f.as_posix()):
            if SKIP_DIRS.intersection(file.parts[:-1]) or file.name.startswith("test_"):
                continue
            path = Path(dist.locate_file(file))
            if not path.is_file():
                raise PipelineError(
                    f"distribution {name} {dist.version} lists {file} but it is not installed "
                    f"(reinstall: pip install -c constraints.txt -e .)"
                )
            text = "\n\n".join(_docstrings(path))
            if text:
                yield f"docstrings:{name}:{file.as_posix()}", text


def distribution_versions(distributions):
    """'name version' of each named installed distribution, comma-separated (the docstring source's log)."""
    return ", ".join(f"{name} {_distribution(name).version}" for name in distributions)


def _distribution(name):
    try:
        dist = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        raise PipelineError(
            f"corpus.distributions: {name!r} is not installed (pip install -c constraints.txt -e .)"
        ) from None
    if dist.files is None:
        raise PipelineError(f"corpus.distributions: {name!r} has no RECORD of its files")
    return dist


class Digest:
    """A (doc_id, text) stream passed through, counting documents and characters and hashing it:
    sha256 over each document's id and text, each followed by a NUL, in order."""

    def __init__(self, documents):
        self.documents, self.count, self.characters, self.sha256 = documents, 0, 0, hashlib.sha256()

    def __iter__(self):
        for doc_id, text in self.documents:
            self.count += 1
            self.characters += len(text)
            self.sha256.update(f"{doc_id}\0{text}\0".encode())
            yield doc_id, text

    def summary(self):
        return f"{self.count:,} documents, {self.characters:,} characters, sha256 {self.sha256.hexdigest()}"


def _docstrings(path):
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node)
            if doc and len(doc) >= 40:
                yield doc.strip()


def hf_documents(path, name=None, split="train", revision=None, text_field="text", max_tokens=1_000_000, shard=(0, 1)):
    """Yield (doc_id, text) streamed from a Hugging Face dataset until ~max_tokens words are read.

    shard (index, count): only that contiguous block of the dataset's data files (corpus.shards),
    its ids prefixed by the index when count > 1.

    Online the rows come from the hub; with HF_HUB_OFFLINE set, from `hf_rows`' local copies, in the
    same order, so the documents and their ids (hence the split) do not depend on the network.
    """
    where = f"{path}{'/' + name if name else ''} [{split}]"
    rows = None
    try:
        seen, (index, count) = 0, shard
        dataset = hf_rows(path, name, split, revision)
        if count > 1:
            if dataset.num_shards < count:
                raise PipelineError(
                    f"dataset {where} has {dataset.num_shards} data files, fewer than corpus.shards ({count})"
                )
            dataset = dataset.shard(count, index)
        rows = iter(dataset)
        for i, row in enumerate(rows):
            if text_field not in row:
                raise PipelineError(f"dataset {where} has no field {text_field!r} (corpus.text_field)")
            text = (row[text_field] or "").strip()
            if text:
                yield (f"{path}:{i}" if count == 1 else f"{path}:{index}:{i}"), text
                seen += len(text.split())
                if seen >= max_tokens:
                    return
    except PipelineError:
        raise
    except Exception as err:  # datasets raises many types for offline / missing datasets
        raise PipelineError(f"cannot stream dataset {where}: {type(err).__name__}: {_first_line(err)}") from err
    finally:
        if rows is not None:  # drop the stream and collect its Arrow scanner now: left to the interpreter's
            del rows, dataset  # shutdown, its threads abort the process now and then (apache/arrow#45214)
            gc.collect()


def hf_rows(path, name, split, revision):
    """A streaming `datasets` split: from the hub, or offline (HF_HUB_OFFLINE) from the dataset
    repository's snapshot in the hub cache (HF_HUB_CACHE, as `hf download` leaves it: README.md
    naming the configs, and the data files), else from a copy `datasets` prepared under
    HF_DATASETS_CACHE; neither there is a PipelineError saying how to fetch it."""
    import datasets  # here: only the `hf` source needs datasets and the hub client
    from huggingface_hub import constants, snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    if not constants.is_offline_mode():
        return datasets.load_dataset(path, name, split=split, revision=revision, streaming=True)
    fetch = f"hf download {path} --repo-type dataset" + (f" --revision {revision}" if revision else "")
    try:
        snapshot = snapshot_download(path, repo_type="dataset", revision=revision, local_files_only=True)
    except LocalEntryNotFoundError:
        try:
            return datasets.load_dataset(path, name, split=split, revision=revision, streaming=True)
        except ConnectionError:
            raise PipelineError(
                f"dataset {path}@{revision or 'main'} is not in the hub cache ({constants.HF_HUB_CACHE}) "
                f"nor prepared in HF_DATASETS_CACHE and HF_HUB_OFFLINE is set: fetch it once "
                f"with the network: {fetch}"
            ) from None
    try:
        return datasets.load_dataset(snapshot, name, split=split, streaming=True)
    except ValueError as err:  # unknown config or split, or a split's files missing from the snapshot
        raise PipelineError(
            f"cannot read dataset {path}@{revision or 'main'} from the hub cache ({snapshot}): "
            f"{_first_line(err)} (files missing? fetch them: {fetch})"
        ) from None


def local_documents(paths, text_field="text"):
    """Yield (doc_id, text) from .txt (one document per file), .jsonl and .parquet files."""
    for p in map(Path, paths):
        if not p.is_file():
            raise PipelineError(f"corpus file not found: {p} (corpus.paths)")
        if p.suffix == ".txt":
            rows = [p.read_text(encoding="utf-8")]
        elif p.suffix in (".jsonl", ".json"):
            rows = _json_lines(p, text_field)
        elif p.suffix == ".parquet":
            import pandas as pd  # here: training and the lens read token arrays through tokens -> shards -> corpus

            frame = pd.read_parquet(p)
            if text_field not in frame:
                raise PipelineError(f"{p} has no column {text_field!r} (corpus.text_field)")
            rows = frame[text_field].tolist()
        else:
            raise PipelineError(f"unsupported corpus file type {p.suffix!r}: {p} (use .txt, .jsonl or .parquet)")
        for i, text in enumerate(rows):
            if text and text.strip():
                yield f"{p.name}:{i}", text.strip()


def _json_lines(path, text_field):
    """The `text_field` of each non-empty line of a JSON lines file, read line by line."""
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                yield json.loads(line).get(text_field, "")


def split_of(doc_id, val_fraction):
    """Deterministic split from a hash of the document id: 'val' for about val_fraction of ids."""
    return "val" if zlib.crc32(doc_id.encode()) % 10_000 < val_fraction * 10_000 else "train"


def _first_line(err):
    return (str(err).strip().splitlines() or [""])[0][:200]

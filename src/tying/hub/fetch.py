"""Models from the Hugging Face hub at pinned revisions: whole, or just their embedding matrices.

Files are read through an fsspec file system: `HfFileSystem` (paths `{repo_id}@{commit}/...`),
or, when HF_HUB_OFFLINE is set, the local file system over the snapshot in the hub cache
(HF_HUB_CACHE / HF_HOME). The embedding-only fetch reads each safetensors header and then
only the byte ranges of the embedding and output tensors. A revision stored only as
pytorch_model.bin (Pythia's step branches, for example) is converted to model.safetensors:
for the embeddings alone, a torch zip checkpoint is read by range too (central directory,
data.pkl, then only the embeddings' storages; sharded, only the shards holding them) and a
legacy (pre-zip) one downloaded whole; a full fetch downloads every .bin file whole.
`plan_fetch` says, from the same metadata, how many bytes a fetch will read.
"""

import fnmatch
import json
import os
import pickle
import posixpath
import tempfile
import zipfile
from collections.abc import Callable
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx2
import torch
from fsspec.implementations.local import LocalFileSystem
from huggingface_hub import HfApi, HfFileSystem, constants
from huggingface_hub.errors import (
    HfHubHTTPError,
    OfflineModeIsEnabled,
    RepositoryNotFoundError,
    RevisionNotFoundError,
    RevisionResolutionError,
)
from huggingface_hub.file_download import repo_folder_name
from safetensors.torch import save_file

from tying.checkpoints.checkpoint_files import weight_digests
from tying.checkpoints.layouts import LAYOUTS
from tying.checkpoints.safetensors_ranges import copy_range, header_bytes, read_header
from tying.errors import PipelineError
from tying.hub.source_record import SOURCE_RECORD
from tying.hub.torch_zip_ranges import CountingReader, TorchZip, is_torch_zip, state_dict, unpickle_error
from tying.io import atomic_path

# Every input-embedding and output-projection tensor name the embedding reader knows.
EMBEDDING_TENSORS = tuple(dict.fromkeys(name for layout in LAYOUTS for name in layout))
INPUT_TENSORS = frozenset(inp for inp, _ in LAYOUTS)
CONFIG_FILES = (
    "config.json",
    "generation_config.json",
    "tokenizer*",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.*",
    "merges.txt",
    "*.jinja",
)
SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
BIN_FILE = "pytorch_model.bin"
BIN_INDEX_FILE = "pytorch_model.bin.index.json"


def fetch_model(repo_id, revision, dest, embeddings_only, fs=None):
    """Fetch `repo_id` at `revision` (branch, tag or commit) into the directory `dest`, atomically.

    Full: config, tokenizer and safetensors files (sharded or not) as they are; a tokenizer.json
    is built from the other tokenizer files when the revision has none.
    embeddings_only: config, tokenizer and one `model.safetensors` holding just the
    EMBEDDING_TENSORS the checkpoint has, under their names, dtype and bytes unchanged.
    Without safetensors, the pytorch_model.bin weights are converted to one model.safetensors
    (every tensor, or the EMBEDDING_TENSORS), a tied output matrix stored as an alias of the
    input one dropped as transformers does.
    fs: the fsspec file system to read through (default: HfFileSystem; offline, the local
    file system over the hub cache). Writes and returns the record `dest/source.json`:
    {repo_id, revision, commit, embeddings_only, bytes_read, weights (tying.checkpoints.checkpoint_files)},
    plus `converted_from` (the .bin file, or list of shards, read) for a converted checkpoint.
    """
    offline = constants.is_offline_mode()
    with hub_errors(f"cannot fetch {repo_id}@{revision}", offline), ExitStack() as stack:
        commit, fs, root, sizes = _revision_files(repo_id, revision, offline, fs)
        weights = _weight_reads(fs, root, sizes, embeddings_only, stack)
        with atomic_path(dest) as tmp:
            tmp.mkdir()
            bytes_read = sum(_copy_file(fs, f"{root}/{name}", tmp / name) for name in _config_files(sizes))
            weight_bytes, converted = weights.write(tmp)
            if not (tmp / "tokenizer.json").is_file():  # e.g. GPT-Neo-2.7B ships only vocab.json + merges.txt
                from transformers import AutoTokenizer  # here: a fetch with a tokenizer.json imports no transformers

                AutoTokenizer.from_pretrained(tmp).backend_tokenizer.save(str(tmp / "tokenizer.json"))
            record = {
                "repo_id": repo_id,
                "revision": revision,
                "commit": commit,
                "embeddings_only": bool(embeddings_only),
                "bytes_read": bytes_read + weight_bytes,
                **converted,
                "weights": weight_digests(tmp),  # checked by every reader (tying.checkpoints.checkpoint_files)
            }
            (tmp / SOURCE_RECORD).write_text(json.dumps(record, indent=2) + "\n")
    return record


def plan_fetch(repo_id, revision, embeddings_only, fs=None):
    """What `fetch_model` would read, from the file listing and the checkpoint's metadata only
    (safetensors headers; a torch zip's central directory and data.pkl). Returns
    {repo_id, revision, commit, embeddings_only, files: {file name: bytes read from it}, bytes}."""
    offline = constants.is_offline_mode()
    with hub_errors(f"cannot fetch {repo_id}@{revision}", offline), ExitStack() as stack:
        commit, fs, root, sizes = _revision_files(repo_id, revision, offline, fs)
        files = {name: sizes[name] for name in _config_files(sizes)}
        files.update(_weight_reads(fs, root, sizes, embeddings_only, stack).files)
    return {
        "repo_id": repo_id,
        "revision": revision,
        "commit": commit,
        "embeddings_only": bool(embeddings_only),
        "files": files,
        "bytes": sum(files.values()),
    }


def resolve_commit(repo_id, revision):
    """The commit hash `revision` of `repo_id` points to: asked of the hub, or read from the
    hub cache's refs when HF_HUB_OFFLINE is set (a commit hash is returned as it is)."""
    resolved = HfApi().resolve_revision(repo_id, revision=revision, local_files_only=constants.is_offline_mode())
    return resolved.resolved


def _revision_files(repo_id, revision, offline, fs):
    """(commit, file system, root path, {file name: size}) of `repo_id` at `revision`; `fs`
    replaces the default file system when given."""
    folder = Path(constants.HF_HUB_CACHE) / repo_folder_name(repo_id=repo_id, repo_type="model")
    if offline and not folder.is_dir():
        raise PipelineError("repository not in the local hub cache (HF_HUB_OFFLINE is set)")
    commit = resolve_commit(repo_id, revision)
    default_fs, root = (
        (LocalFileSystem(), str(folder / "snapshots" / commit)) if offline else (HfFileSystem(), f"{repo_id}@{commit}")
    )
    fs = fs or default_fs
    if not fs.isdir(root):
        raise PipelineError(f"commit {commit} not found" + (" in the local hub cache" if offline else ""))
    return commit, fs, root, {posixpath.basename(info["name"]): info["size"] for info in fs.ls(root, detail=True)}


def _config_files(names):
    return sorted(name for name in names if any(fnmatch.fnmatch(name, pattern) for pattern in CONFIG_FILES))


@dataclass
class _WeightReads:
    """The weight files a fetch reads, their headers or index already read."""

    files: dict  # {file name: bytes the fetch reads from it, metadata already read included}
    write: Callable  # write(out_dir) -> (bytes read, the record's extra fields)


def _weight_reads(fs, root, sizes, embeddings_only, stack):
    """The _WeightReads that put the checkpoint's weights into a folder: safetensors as they are,
    or only the EMBEDDING_TENSORS in one model.safetensors; pytorch_model.bin converted to
    model.safetensors. `sizes`: {file name: size} at `root`; `stack` holds the open files."""
    if INDEX_FILE in sizes or SINGLE_FILE in sizes:
        index, shards = _shards(fs, root, sizes, INDEX_FILE, SINGLE_FILE, embeddings_only)
        if embeddings_only:
            return _safetensors_embeddings(fs, root, index, shards, stack)
        return _safetensors_whole(fs, root, index, shards, sizes)
    if BIN_INDEX_FILE in sizes or BIN_FILE in sizes:
        index, shards = _shards(fs, root, sizes, BIN_INDEX_FILE, BIN_FILE, embeddings_only)
        return _bin_conversion(fs, root, index, shards, sizes, embeddings_only, stack)
    raise PipelineError(f"no {SINGLE_FILE} or {BIN_FILE} (single or sharded with an .index.json) at this revision")


def _shards(fs, root, names, index_name, single_name, embeddings_only):
    """(index bytes, shard file names) of a single-file or sharded checkpoint; embeddings_only,
    only the shards holding EMBEDDING_TENSORS (index bytes b"" when not sharded)."""
    if index_name not in names:
        return b"", [single_name]
    index = fs.cat_file(f"{root}/{index_name}")
    weight_map = json.loads(index)["weight_map"]
    wanted = [name for name in EMBEDDING_TENSORS if name in weight_map] if embeddings_only else weight_map
    if not wanted:
        raise _no_embeddings(index_name)
    return index, sorted({weight_map[name] for name in wanted})


def _no_embeddings(where):
    return PipelineError(f"no embedding tensor ({', '.join(EMBEDDING_TENSORS)}) in {where}")


def _index_files(index, index_name):
    return {index_name: len(index)} if index else {}


def _safetensors_whole(fs, root, index, shards, sizes):
    """Copy the safetensors shards, and their index, as they are."""

    def write(out_dir):
        if index:
            (out_dir / INDEX_FILE).write_bytes(index)
        return len(index) + sum(_copy_file(fs, f"{root}/{shard}", out_dir / shard) for shard in shards), {}

    return _WeightReads(_index_files(index, INDEX_FILE) | {shard: sizes[shard] for shard in shards}, write)


def _safetensors_embeddings(fs, root, index, shards, stack):
    """One model.safetensors of the EMBEDDING_TENSORS found in the safetensors `shards`, reading
    only their headers (now) and those tensors' byte ranges (when written)."""
    files, parts, metadata = _index_files(index, INDEX_FILE), [], {}
    for shard in shards:
        src = stack.enter_context(fs.open(f"{root}/{shard}", "rb", cache_type="none"))
        tensors, file_metadata, data_start = read_header(src, shard)
        metadata.update(file_metadata)
        files[shard] = data_start
        for name in EMBEDDING_TENSORS:
            if name in tensors:
                begin, end = tensors[name]["data_offsets"]
                parts.append((src, name, tensors[name], data_start + begin, end - begin))
                files[shard] += end - begin
    if not parts:
        raise _no_embeddings("the checkpoint")

    def write(out_dir):
        with open(out_dir / SINGLE_FILE, "wb") as dst:
            dst.write(header_bytes([(name, t["dtype"], t["shape"], n) for _, name, t, _, n in parts], metadata))
            for src, _, _, start, nbytes in parts:
                copy_range(src, dst, start, nbytes)
        return sum(files.values()), {}

    return _WeightReads(files, write)


def _bin_conversion(fs, root, index, shards, sizes, embeddings_only, stack):
    """One model.safetensors of the tensors, or only the EMBEDDING_TENSORS, of the pytorch_model.bin
    `shards`. embeddings_only, a torch zip shard is indexed now (central directory, data.pkl) and
    only the embeddings' storages are read; a legacy (pre-zip) one, and every shard of a full
    fetch, is downloaded whole and loaded (memory-mapped when it is a zip)."""
    files, opened = _index_files(index, BIN_INDEX_FILE), {}
    for shard in shards:
        files[shard] = sizes[shard]
        if embeddings_only:
            reader = CountingReader(stack.enter_context(fs.open(f"{root}/{shard}", "rb", cache_type="none")))
            archive = TorchZip(reader, shard) if is_torch_zip(reader) else None
            wanted = [name for name in EMBEDDING_TENSORS if name in archive.layout] if archive else None
            opened[shard] = reader, archive, wanted
            files[shard] = reader.bytes_read + (archive.storage_bytes(wanted) if archive else sizes[shard])

    def write(out_dir):
        bytes_read, tensors = len(index), {}
        with tempfile.TemporaryDirectory(dir=out_dir) as downloads:
            for shard in shards:
                reader, archive, wanted = opened.get(shard, (None, None, None))
                if archive:
                    tensors.update(archive.tensors(wanted))
                else:
                    path, nbytes = _local_file(fs, f"{root}/{shard}", Path(downloads) / shard)
                    bytes_read += nbytes
                    tensors.update(_load_bin(path, shard))
                bytes_read += reader.bytes_read if reader else 0
            if embeddings_only:
                tensors = {name: tensor for name, tensor in tensors.items() if name in EMBEDDING_TENSORS}
                if not tensors:
                    raise _no_embeddings(", ".join(shards))
            save_file(_unshared(tensors), out_dir / SINGLE_FILE, metadata={"format": "pt"})
        return bytes_read, {"converted_from": shards if index else shards[0]}

    return _WeightReads(files, write)


def _local_file(fs, path, download):
    """(a local path of the file `path`, its size): the file itself on a local file system
    (the hub cache), else downloaded whole to `download`."""
    if isinstance(fs, LocalFileSystem):
        return path, os.path.getsize(path)
    return download, _copy_file(fs, path, download)


def _load_bin(path, name):
    """The state dict {tensor name: tensor} of the torch checkpoint at `path`: memory-mapped, or
    read into memory when it has torch's legacy (pre-zip) serialization, which cannot be mapped."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True, mmap=zipfile.is_zipfile(path))
    except (RuntimeError, pickle.UnpicklingError) as error:
        raise unpickle_error(name, error) from None
    return state_dict(state, name)


def _unshared(tensors):
    """`tensors` as safetensors can store them: a tensor that is an exact alias of another
    (a tied output matrix) is dropped, input embeddings kept first; one that shares memory
    otherwise (a view) is copied."""
    kept, aliases, storages = {}, set(), set()
    for name in sorted(tensors, key=lambda name: name not in INPUT_TENSORS):
        tensor = tensors[name]
        storage = tensor.untyped_storage().data_ptr()
        alias = (storage, tensor.storage_offset(), tuple(tensor.shape), tensor.stride(), tensor.dtype)
        if storage and alias in aliases:
            continue
        aliases.add(alias)
        kept[name] = (
            tensor.clone(memory_format=torch.contiguous_format)
            if storage and storage in storages
            else tensor.contiguous()
        )
        storages.add(storage)
    return kept


def _copy_file(fs, path, local):
    """Copy one whole file to the local path; returns its size in bytes."""
    fs.get_file(path, str(local))
    return local.stat().st_size


@contextmanager
def hub_errors(action, offline):
    """Re-raise hub and cache failures as one-line PipelineErrors, `{action}: {reason}`."""
    try:
        yield
    except Exception as error:
        reason = _reason(error, offline)
        if reason is None:
            raise
        raise PipelineError(f"{action}: {reason}") from error


def _reason(error, offline):
    """One line saying why a hub request failed, or None for an error that is not the hub's."""
    if isinstance(error, PipelineError):
        return str(error)
    if isinstance(error, RevisionNotFoundError):
        return "revision not found"
    if isinstance(error, RepositoryNotFoundError):
        return "repository not found (or private/gated without a token)"
    if isinstance(error, RevisionResolutionError):
        if offline:
            return "revision not found in the local hub cache (HF_HUB_OFFLINE is set)"
        return "hub unreachable (offline?) and revision not in the local hub cache"
    if isinstance(error, (httpx2.TransportError, OfflineModeIsEnabled)):
        return "hub unreachable (offline?)"
    if isinstance(error, HfHubHTTPError):
        return f"hub answered HTTP {error.response.status_code}"
    if isinstance(error, FileNotFoundError):
        return "missing file: " + (str(error).splitlines() or [""])[0]
    return None

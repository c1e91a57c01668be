"""A checkpoint's weight files, checked against the sizes and SHA-256 digests recorded when they were written.

A checkpoint is one Snakemake `directory()` output, so a weight file truncated or changed inside it
goes unseen until a job reads it. Its writer stores `weight_digests(dir)` under "weights" in the
directory's record (training.json of an exported checkpoint, source.json of a fetched one); a reader
calls `verify(dir)` before it opens a weight file.
"""

import hashlib
import json
import os
from pathlib import Path

from tying.checkpoints.safetensors_ranges import read_header
from tying.errors import PipelineError

RECORDS = ("training.json", "source.json")
WEIGHT_FILES = "*.safetensors"
DIGEST_LIMIT_BYTES = 2**30  # larger files: size only, unless VERIFY_ALL_ENV asks for every digest
VERIFY_ALL_ENV = "TYING_VERIFY_DIGESTS"
SAFETENSORS, BIN = "model.safetensors", "pytorch_model.bin"
# (index, single file) of each weight format save_pretrained writes, in the order transformers prefers them.
FORMATS = ((f"{SAFETENSORS}.index.json", SAFETENSORS), (f"{BIN}.index.json", BIN))


def weight_digests(directory):
    """{file name: {"bytes": size, "sha256": hex digest}} of the weight files in `directory`."""
    return {
        path.name: {"bytes": path.stat().st_size, "sha256": _sha256(path)}
        for path in sorted(Path(directory).glob(WEIGHT_FILES))
    }


def verify(directory, digests=None):
    """Check the weight files recorded in `directory`'s record; a one-line PipelineError names the first
    that is missing or differs, and how to rebuild it.

    Sizes are always compared; digests of files up to DIGEST_LIMIT_BYTES, of every file when `digests`
    is True or the environment sets TYING_VERIFY_DIGESTS=1, of none when `digests` is False.
    A directory whose record holds no digests (not written by this pipeline) passes unchecked.
    """
    directory = Path(directory)
    if digests is None:
        digests = os.environ.get(VERIFY_ALL_ENV) == "1" or None
    for name, expected in _recorded(directory).items():
        path = directory / name
        problem = _problem(path, expected, digests)
        if problem:
            raise PipelineError(f"{path}: {problem}; rebuild it with: snakemake --force {directory}")


def stored_tensors(directory):
    """Tensor name -> the weight file holding it, in a directory save_pretrained wrote: model.safetensors, else
    pytorch_model.bin, each single or sharded (an index), read from the index or the safetensors header. None for
    a single pytorch_model.bin, whose names only torch can read (its pickle). A one-line PipelineError when the
    directory holds no weights or its index names a shard that is not there."""
    directory = Path(directory)
    for index, single in FORMATS:
        if (directory / index).is_file():
            files = {
                name: directory / shard
                for name, shard in json.loads((directory / index).read_text())["weight_map"].items()
            }
            missing = sorted({path.name for path in files.values() if not path.is_file()})
            if missing:
                raise PipelineError(f"{directory / index}: names {missing[0]}, which is not there")
            return files
        if (directory / single).is_file():
            if single == BIN:
                return None
            with open(directory / single, "rb") as f:
                tensors, _, _ = read_header(f, str(directory / single))
            return dict.fromkeys(tensors, directory / single)
    raise PipelineError(f"{directory}: no weights ({SAFETENSORS} or {BIN}, or the index of either's shards)")


def _recorded(directory):
    for name in RECORDS:
        if (directory / name).is_file():
            return json.loads((directory / name).read_text()).get("weights", {})
    return {}


def _problem(path, expected, digests):
    """Why `path` does not match its record {"bytes", "sha256"}, or None."""
    if not path.is_file():
        return "missing"
    size = path.stat().st_size
    if size != expected["bytes"]:
        return f"{size} bytes, but {expected['bytes']} were written (truncated or replaced)"
    check_digest = digests if digests is not None else size <= DIGEST_LIMIT_BYTES
    if check_digest and _sha256(path) != expected["sha256"]:
        return "contents differ from the SHA-256 recorded when it was written"
    return None


def _sha256(path):
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()

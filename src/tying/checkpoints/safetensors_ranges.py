"""Safetensors by byte range: read a header, copy one tensor's bytes, lay out a new file.

A safetensors file is an 8-byte little-endian header length N, N bytes of JSON
({name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}),
then the tensor bytes; offsets count from the first byte after the header.
"""

import json
import struct

from tying.errors import PipelineError

LENGTH_BYTES = 8
MAX_HEADER_BYTES = 100_000_000  # the safetensors library's own limit
COPY_CHUNK_BYTES = 64 * 2**20


def read_header(f, name):
    """Parse the header of the safetensors file open (binary, seekable) as `f`; `name` labels errors.

    Returns (tensors, metadata, data_start): tensors maps each tensor name to
    {"dtype", "shape", "data_offsets"}, metadata is the "__metadata__" dict ({} if absent),
    data_start is the absolute offset of the first tensor byte (8 + N).
    """
    f.seek(0)
    prefix = f.read(LENGTH_BYTES)
    if len(prefix) < LENGTH_BYTES:
        raise PipelineError(f"{name}: too short to be a safetensors file")
    (length,) = struct.unpack("<Q", prefix)
    if length > MAX_HEADER_BYTES:
        raise PipelineError(f"{name}: safetensors header length {length} is implausible")
    raw = f.read(length)
    try:
        tensors = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise PipelineError(f"{name}: safetensors header is not valid JSON") from None
    if len(raw) < length or not isinstance(tensors, dict):
        raise PipelineError(f"{name}: truncated or malformed safetensors header")
    metadata = tensors.pop("__metadata__", None) or {}
    return tensors, metadata, LENGTH_BYTES + length


def header_bytes(entries, metadata):
    """Serialized header for tensors stored back to back in the order given.

    entries: list of (name, dtype, shape, nbytes); metadata: dict of str -> str (may be empty).
    Returns the length prefix and the JSON, padded with spaces so the data starts 8-byte aligned.
    """
    header = {"__metadata__": metadata} if metadata else {}
    offset = 0
    for name, dtype, shape, nbytes in entries:
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text


def copy_range(src, dst, start, length, chunk=COPY_CHUNK_BYTES):
    """Copy bytes [start, start + length) of the open file `src` to the current position of `dst`.

    Reads at most `chunk` bytes at a time, so a large tensor never sits whole in memory.
    """
    src.seek(start)
    remaining = length
    while remaining:
        block = src.read(min(chunk, remaining))
        if not block:
            raise PipelineError("safetensors file ends inside a tensor")
        dst.write(block)
        remaining -= len(block)

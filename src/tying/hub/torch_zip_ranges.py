"""Torch zip checkpoints by byte range: the central directory, data.pkl, then only the wanted storages.

torch.save (since torch 1.6) writes a zip archive of uncompressed entries: `{archive}/data.pkl`, a
pickle of the state dict whose tensors name their storage by key, and `{archive}/data/{key}`, each
storage's raw bytes. A checkpoint open as a seekable binary file (an HfFileSystem file reads each
`read` as one HTTP range request) is indexed from its end record, central directory and data.pkl;
a storage is then read as its 30-byte local header and its bytes, checked against the CRC.
"""

import io
import pickle
import struct
import sys
import zipfile
import zlib

import torch
from torch import _weights_only_unpickler

from tying.errors import PipelineError

ZIP_MAGIC = b"PK\x03\x04"
LOCAL_HEADER = struct.Struct("<4s5H3L2H")  # signature ... file name length, extra field length


class CountingReader:
    """A seekable binary file that counts the bytes read through it."""

    def __init__(self, f):
        self._f, self.bytes_read = f, 0

    def read(self, size=-1):
        data = self._f.read(size)
        self.bytes_read += len(data)
        return data

    def seek(self, offset, whence=0):
        return self._f.seek(offset, whence)

    def tell(self):
        return self._f.tell()

    def seekable(self):
        return True


def is_torch_zip(f):
    """True when the file open as `f` starts as a zip archive (torch >= 1.6), False for torch's
    legacy pickle serialization; reads its first 4 bytes."""
    f.seek(0)
    return f.read(len(ZIP_MAGIC)) == ZIP_MAGIC


def unpickle_error(name, error):
    """The one-line error for a torch checkpoint that is not a loadable weights-only state dict."""
    return PipelineError(
        f"{name}: not loadable as a weights-only torch checkpoint: " + (str(error).splitlines() or [""])[0]
    )


def state_dict(state, name):
    """`state`, unpickled from the torch checkpoint `name`, when it is a dict of tensors; else a one-line error."""
    if not isinstance(state, dict) or not all(isinstance(t, torch.Tensor) for t in state.values()):
        raise PipelineError(f"{name}: not a state dict of tensors")
    return state


class TorchZip:
    """The state dict layout of the torch zip checkpoint open as `f` (`name` labels errors), read
    from its central directory and data.pkl; `tensors(names)` then reads just those tensors."""

    def __init__(self, f, name):
        self._f, self._name = f, name
        try:
            self._zip = zipfile.ZipFile(f)
        except zipfile.BadZipFile as error:
            raise PipelineError(f"{name}: not a readable zip archive: {error}") from None
        pickles = [n for n in self._zip.namelist() if n.endswith("/data.pkl")]
        if len(pickles) != 1:
            raise PipelineError(f"{name}: no single data.pkl in the torch zip archive")
        self._prefix = pickles[0][: -len("data.pkl")]
        self._check_byteorder()
        self.layout = self._layout(self._read_entry(pickles[0]))

    def storage_bytes(self, names):
        """Bytes `tensors(names)` reads: each distinct storage's local header and data."""
        return sum(LOCAL_HEADER.size + self._info(self._storage_entry(key)).compress_size for key in self._keys(names))

    def tensors(self, names):
        """{name: tensor} of `names` (each in `layout`), reading only their storages; tensors that
        shared a storage in the checkpoint share one here."""
        storages = {}
        for key in self._keys(names):
            data = bytearray(self._read_entry(self._storage_entry(key)))
            storages[key] = torch.frombuffer(data, dtype=torch.uint8).untyped_storage()
        out = {}
        for name in names:
            key, meta = self.layout[name]
            out[name] = torch.empty(0, dtype=meta.dtype).set_(
                storages[key], meta.storage_offset(), meta.shape, meta.stride()
            )
        return out

    def _keys(self, names):
        return sorted({self.layout[name][0] for name in names})

    def _storage_entry(self, key):
        return f"{self._prefix}data/{key}"

    def _info(self, entry):
        try:
            return self._zip.getinfo(entry)
        except KeyError:
            raise PipelineError(f"{self._name}: {entry} missing from the archive") from None

    def _check_byteorder(self):
        """Refuse a checkpoint stored in the other byte order (no byteorder record: little-endian,
        as torch assumes)."""
        record = self._prefix + "byteorder"
        order = self._read_entry(record).decode() if record in self._zip.namelist() else "little"
        if order != sys.byteorder:
            raise PipelineError(f"{self._name}: stored {order}-endian, this machine is {sys.byteorder}-endian")

    def _layout(self, pickled):
        """{tensor name: (storage key, a meta tensor with its dtype, shape, stride and offset)},
        from data.pkl unpickled weights-only with storages on the meta device (no data read)."""
        keys = {}

        def persistent_load(saved_id):
            _, storage_type, key, _, numel = saved_id
            dtype = torch.uint8 if storage_type is torch.UntypedStorage else storage_type.dtype
            storage = torch.UntypedStorage(numel * torch._utils._element_size(dtype), device="meta")
            keys[storage._cdata] = key
            return torch.storage.TypedStorage(wrap_storage=storage, dtype=dtype, _internal=True)

        unpickler = _weights_only_unpickler.Unpickler(io.BytesIO(pickled), encoding="utf-8")
        unpickler.persistent_load = persistent_load
        try:
            state = unpickler.load()
        except (RuntimeError, pickle.UnpicklingError, ValueError, TypeError) as error:
            raise unpickle_error(self._name, error) from None
        return {name: (keys[t.untyped_storage()._cdata], t) for name, t in state_dict(state, self._name).items()}

    def _read_entry(self, entry):
        """The bytes of the stored (uncompressed) zip entry `entry`: its local header, then its data."""
        info = self._info(entry)
        if info.compress_type != zipfile.ZIP_STORED:
            raise PipelineError(f"{self._name}: {entry} is compressed; torch checkpoints store entries as they are")
        self._f.seek(info.header_offset)
        header = LOCAL_HEADER.unpack(self._f.read(LOCAL_HEADER.size))
        if header[0] != ZIP_MAGIC:
            raise PipelineError(f"{self._name}: bad local header for {entry}")
        self._f.seek(info.header_offset + LOCAL_HEADER.size + header[-2] + header[-1])
        data = self._f.read(info.compress_size)
        if len(data) != info.compress_size or zlib.crc32(data) != info.CRC:
            raise PipelineError(f"{self._name}: {entry} is truncated or corrupt (CRC mismatch)")
        return data

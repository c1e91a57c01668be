"""Atomic writes: an output appears whole or not at all."""

import os
import shutil
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_path(path):
    """Yield a temporary sibling of `path`; move it into place only if the block succeeds.

    Works for files and directories alike; every file gets the mode open() gives.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    _remove(tmp)
    try:
        yield tmp
        _plain_modes(tmp)
        _remove(path)
        os.replace(tmp, path)
    finally:
        _remove(tmp)


def _plain_modes(path):
    """Give the files at or under `path` the mode open() gives, 0666 less the umask: safetensors (and so
    save_pretrained) writes through a temporary file of mode 0600."""
    umask = os.umask(0)
    os.umask(umask)
    files = [Path(root, name) for root, _, names in os.walk(path) for name in names] if path.is_dir() else [path]
    for file in files:
        if file.is_file() and not file.is_symlink():
            os.chmod(file, 0o666 & ~umask)


def _remove(path):
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def write_parquet(df, path):
    """Write a DataFrame to Parquet atomically."""
    with atomic_path(path) as tmp:
        df.to_parquet(tmp, index=False)

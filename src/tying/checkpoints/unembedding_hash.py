"""tuned-lens's hash of a model's unembedding matrix (`tuned_lens.utils.tensor_hash`: the sha256 of numpy's
one-decimal printout of the matrix as float32), from a model in memory or, without torch, from its weight files.

numpy prints a matrix of more than 1,000 entries as its corners (the first and last 3 rows and columns), so the
file's hash needs those 6 rows alone, read by byte range (tying.checkpoints.safetensors_ranges): a check before
any job hashes a 50k x 4k output matrix as fast as a tiny one. The hash depends on the dtype the model was loaded
in, so a stored matrix gives one hash per dtype a lens could have been made under (`stored_unembedding_hashes`).
"""

import hashlib
import json
from pathlib import Path

import numpy as np

from tying.checkpoints.checkpoint_files import stored_tensors
from tying.checkpoints.layouts import header_embedding_names
from tying.checkpoints.safetensors_ranges import read_header

EDGE = 3  # numpy's edgeitems: the rows and columns of each end a summarised printout shows
SUMMARY = 1000  # numpy's threshold: a matrix of more entries prints summarised
READ = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "BF16": np.uint16}


def matrix_hash(matrix):
    """The hash of a float32 (V, d) numpy matrix, as tuned-lens computes it."""
    return hashlib.sha256(np.array_str(matrix, precision=1).encode()).hexdigest()


def stored_unembedding_hashes(model_dir, tied):
    """{dtype: hash} of the unembedding a save_pretrained directory stores (the input embedding of a `tied`
    model), as a model loaded in float32, bfloat16 or float16 hashes it; {} where the files do not settle which
    tensor it is without torch (a pytorch_model.bin, a header the layouts do not read)."""
    model_dir = Path(model_dir)
    files = stored_tensors(model_dir)
    if files is None:
        return {}
    shapes, entries = {}, {}
    for path in dict.fromkeys(files.values()):
        with open(path, "rb") as f:
            tensors, _, start = read_header(f, str(path))
        entries |= {name: (path, start, entry) for name, entry in tensors.items()}
        shapes |= {name: entry["shape"] for name, entry in tensors.items()}
    config_path = model_dir / "config.json"
    names = header_embedding_names(shapes, json.loads(config_path.read_text()) if config_path.is_file() else {})
    name = None if names is None else names[0] if tied else names[1]
    if name is None or entries[name][2]["dtype"] not in READ:
        return {}
    corners = _corners(*entries[name])
    return {
        dtype: _printed_hash(round_to(corners, dtype), shapes[name]) for dtype in ("float32", "bfloat16", "float16")
    }


def _corners(path, data_start, entry):
    """The float32 matrix of the rows numpy's printout reads (all of a small matrix's), and of their columns,
    its first and last EDGE of each plus one between them when there are more (not printed)."""
    rows, cols = entry["shape"]
    wanted = (
        list(range(rows))
        if rows * cols <= SUMMARY or rows <= 2 * EDGE
        else [*range(EDGE + 1), *range(rows - EDGE, rows)]
    )
    dtype = READ[entry["dtype"]]
    width = cols * np.dtype(dtype).itemsize
    with open(path, "rb") as f:
        data = []
        for row in wanted:
            f.seek(data_start + entry["data_offsets"][0] + row * width)
            data.append(np.frombuffer(f.read(width), dtype=dtype))
    matrix = np.stack(data)
    bfloat16 = entry["dtype"] == "BF16"  # its bits are a float32's upper half
    matrix = (matrix.astype(np.uint32) << 16).view(np.float32) if bfloat16 else matrix.astype(np.float32)
    if rows * cols > SUMMARY and cols > 2 * EDGE:
        matrix = matrix[:, [*range(EDGE + 1), *range(cols - EDGE, cols)]]
    return matrix


def _printed_hash(corners, shape):
    """matrix_hash of a matrix of `shape` whose printed entries `corners` holds (_corners)."""
    if shape[0] * shape[1] <= SUMMARY:
        return matrix_hash(corners)
    with np.printoptions(threshold=0):  # as summarised as the whole matrix prints
        return matrix_hash(corners)


def round_to(matrix, dtype):
    """A float32 matrix's values as a model loaded in `dtype` holds them, back in float32 (round to nearest even)."""
    if dtype == "float16":
        return matrix.astype(np.float16).astype(np.float32)
    if dtype == "bfloat16":
        bits = matrix.view(np.uint32).astype(np.uint64)
        return (((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)
    return matrix

"""Memory requests of the matrix jobs, from the shapes of the matrices they read.

A matrix job (alignment, KNN, scaling, evolution, norm-frequency, claims over training, a control)
loads the input and output embedding matrices of a few models as float32 (tying.checkpoints.embeddings) and works
on copies of them. Its peak is the process's base (Python, torch, pandas imported) plus a multiple of
the float32 bytes of the matrices it holds at once; the multiples below are measured peaks of a small
case (tests/plan/test_memory.py scales them to Qwen3-8B shapes). The shapes come from the checkpoints'
safetensors headers, so nothing but a few header bytes is read. At planning time a checkpoint may not
exist yet (not trained, not fetched): the request is then the rule's `fallback_mb`; Snakemake
evaluates resources again once a job's inputs exist, before it is scheduled or submitted. A checkpoint that
is there but damaged or half written (a header that does not parse, an index naming a missing shard) gets the
fallback too: a resource function never raises, so the job itself runs its check (tying.checkpoints.checkpoint_files)
and stops with one line naming the file and the command that rebuilds it.
"""

import json
import math
from pathlib import Path

from tying.checkpoints.layouts import stored_embedding_shapes
from tying.checkpoints.safetensors_ranges import read_header
from tying.errors import PipelineError

BASE_MB = 1000  # a metric process with its libraries imported and torch started (measured 450 MB), with headroom
FLOAT32_BYTES = 4
# Peak working memory above the base, per metric: multiples of the float32 matrices held at once
# (WORKING_COPIES) and of one d x d float32 matrix of the widest model (SQUARE_COPIES: the fitted maps).
# Measured peaks (tests/plan/test_memory.py, tests/plan/memory_probe.py) above a tiny case's, at V 8192-18958 and
# d 512-2048: alignment 1.6-2.9 matrix copies plus about 46 d x d; KNN 1.9-3.1 (unit rows, similarity
# chunks); evolution and norm-frequency 1.0-1.5 of the models they hold. Rounded up.
WORKING_COPIES = {
    "alignment": 3.0,
    "scaling": 3.0,
    "trajectory": 3.0,
    "knn": 3.0,
    "evolution": 1.5,
    "norm_freq": 1.5,
    "control": 2.0,
}
SQUARE_COPIES = {"alignment": 60, "scaling": 60, "trajectory": 60}


def embedding_shapes(model_dir):
    """[(rows, columns)] of the input and output matrices (a tied model stores one) of the checkpoint
    directory `model_dir`, read from its safetensors headers; None when it is not there."""
    model_dir = Path(model_dir)
    files = _header_files(model_dir)
    if files is None:
        return None
    shapes = {}
    for path in files:
        with open(path, "rb") as f:
            tensors, _, _ = read_header(f, str(path))
        shapes |= {name: entry["shape"] for name, entry in tensors.items()}
    config = model_dir / "config.json"
    return stored_embedding_shapes(shapes, json.loads(config.read_text()) if config.is_file() else {})


def request_mb(metric, model_dirs, fallback_mb, held=None):
    """mem_mb of a `metric` job reading `model_dirs`: BASE_MB, WORKING_COPIES[metric] x the float32 bytes of
    the `held` largest models (default all) it holds at once, SQUARE_COPIES[metric] x a d x d float32
    matrix; `fallback_mb` while any of them is not there yet (planning before training or fetching)."""
    try:
        shapes = [embedding_shapes(d) for d in model_dirs]
    except (PipelineError, OSError, ValueError, KeyError, TypeError):  # damaged: the job's own check reports it
        return fallback_mb
    if not shapes or None in shapes:
        return fallback_mb
    sizes = sorted((sum(r * c * FLOAT32_BYTES for r, c in s) for s in shapes), reverse=True)
    width = max(c for s in shapes for _, c in s)
    working = WORKING_COPIES[metric] * sum(sizes[:held]) + SQUARE_COPIES.get(metric, 0) * width**2 * FLOAT32_BYTES
    return BASE_MB + math.ceil(working / 2**20)


def _header_files(model_dir):
    """The safetensors files of a checkpoint directory (one, or an index's shards); None if absent."""
    index, single = model_dir / "model.safetensors.index.json", model_dir / "model.safetensors"
    if index.is_file():
        return sorted({model_dir / shard for shard in json.loads(index.read_text())["weight_map"].values()})
    return [single] if single.is_file() else None

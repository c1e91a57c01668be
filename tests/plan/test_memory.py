"""Matrix jobs ask for memory from the shapes in their checkpoints' headers, enough for Qwen3-8B."""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer
from tokenizers.models import WordLevel

from tying.checkpoints.safetensors_ranges import header_bytes
from tying.plan import memory

QWEN3_8B = (151_669, 4_096)  # the untied Qwen3-8B's vocabulary rows and hidden size
PROBE = Path(__file__).with_name("memory_probe.py")


def header_only_checkpoint(path, tensors, dtype="BF16", index=False):
    """A checkpoint whose model.safetensors holds `tensors` {name: shape} as a header and a sparse body."""
    path.mkdir(parents=True)
    nbytes = {"BF16": 2, "F32": 4}[dtype]
    entries = [(name, dtype, shape, math.prod(shape) * nbytes) for name, shape in tensors.items()]
    name = "model-00001-of-00001.safetensors" if index else "model.safetensors"
    with open(path / name, "wb") as f:
        f.write(header_bytes(entries, {}))
        f.truncate(f.tell() + sum(e[3] for e in entries))
    if index:
        (path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {n: name for n in tensors}}))
    return path


def checkpoint(path, matrices):
    """A loadable float32 checkpoint: {tensor name: (V, d) tensor}, config and a word-level tokenizer."""
    path.mkdir(parents=True)
    save_file(matrices, str(path / "model.safetensors"))
    vocab = next(iter(matrices.values())).shape[0]
    (path / "config.json").write_text(json.dumps({"model_type": "qwen3", "tie_word_embeddings": len(matrices) == 1}))
    Tokenizer(WordLevel({f"t{i}": i for i in range(vocab)}, unk_token="t0")).save(str(path / "tokenizer.json"))
    return path


def qwen_pair(tmp_path, vocab, dim, make):
    untied = make(tmp_path / "untied", {"model.embed_tokens.weight": (vocab, dim), "lm_head.weight": (vocab, dim)})
    tied = make(tmp_path / "tied", {"model.embed_tokens.weight": (vocab, dim)})
    return untied, tied


def measured(metric, untied, tied):
    """(base, peak) RSS bytes of `metric` on the pair, in a fresh process (tests/plan/memory_probe.py)."""
    done = subprocess.run(
        [sys.executable, str(PROBE), metric, str(untied), str(tied)], capture_output=True, text=True, check=True
    )
    result = json.loads(done.stdout)
    return result["base"], result["peak"]


def test_shapes_come_from_the_headers_of_single_and_sharded_checkpoints(tmp_path):
    untied = header_only_checkpoint(
        tmp_path / "u", {"model.embed_tokens.weight": [100, 8], "lm_head.weight": [100, 8], "model.norm.weight": [8]}
    )
    sharded = header_only_checkpoint(tmp_path / "s", {"gpt_neox.embed_in.weight": [50, 4]}, dtype="F32", index=True)
    assert memory.embedding_shapes(untied) == [(100, 8), (100, 8)]
    assert memory.embedding_shapes(sharded) == [(50, 4)]
    assert memory.embedding_shapes(tmp_path / "not_fetched_yet") is None


def test_a_job_planned_before_its_checkpoints_exist_asks_for_the_fallback(tmp_path):
    present = header_only_checkpoint(tmp_path / "u", {"model.embed_tokens.weight": [100, 8]})
    assert memory.request_mb("alignment", [present, tmp_path / "absent"], fallback_mb=4000) == 4000
    assert memory.request_mb("alignment", [present], fallback_mb=4000) < 4000  # a small model: less


@pytest.fixture(scope="module")
def qwen3_8b_requests(tmp_path_factory):
    untied, tied = qwen_pair(tmp_path_factory.mktemp("qwen"), *QWEN3_8B, header_only_checkpoint)
    return {metric: memory.request_mb(metric, [untied, tied], fallback_mb=4000) for metric in ("alignment", "knn")}


@pytest.mark.parametrize("metric", ["alignment", "knn"])
def test_the_request_at_qwen3_8b_shapes_covers_a_measured_peak_scaled_up(tmp_path, qwen3_8b_requests, metric):
    """A pair at 1/8 of Qwen3-8B's vocabulary and width (so every term of the job's memory shrinks at least
    as fast as its matrices' bytes), measured above a tiny pair's peak (imports, torch's start), scaled to
    Qwen3-8B by the bytes of the matrices: the request covers it. The matrices alone: 3 x 151,669 x 4,096
    float32 = 7.45 GB."""
    generator = torch.Generator().manual_seed(0)

    def make(path, tensors):
        return checkpoint(path, {n: torch.randn(*shape, generator=generator) for n, shape in tensors.items()})

    vocab, dim = QWEN3_8B[0] // 8, QWEN3_8B[1] // 8
    _, tiny_peak = measured(metric, *qwen_pair(tmp_path / "tiny", 64, 8, make))
    small = qwen_pair(tmp_path / "small", vocab, dim, make)
    _, small_peak = measured(metric, *small)
    scale = 3 * QWEN3_8B[0] * QWEN3_8B[1] / (3 * vocab * dim)
    scaled_peak_mb = (tiny_peak + (small_peak - tiny_peak) * scale) / 2**20
    print(f"{metric}: request {qwen3_8b_requests[metric]} MB, scaled measured peak {scaled_peak_mb:.0f} MB")
    assert qwen3_8b_requests[metric] >= scaled_peak_mb, (qwen3_8b_requests[metric], scaled_peak_mb)
    assert qwen3_8b_requests[metric] >= 3 * 151_669 * 4_096 * 4 / 2**20 + memory.BASE_MB

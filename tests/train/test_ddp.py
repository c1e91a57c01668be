"""Two CPU processes under torchrun (gloo), killed and resumed, give the one-process run:
losses, gradient provenance and weights."""

import json

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import markov_tokens, word_tokenizer
from helpers import write_ids
from safetensors.torch import load_file

from tying.errors import PipelineError
from tying.plan.run_spec import RunSpec
from tying.train.distributed import launch
from tying.train.loop import train_from_files

V = 64
SPEC = RunSpec(
    family="olmo",
    vocab_size=V,
    eos_id=0,
    hidden_size=16,
    layers=2,
    heads=2,
    intermediate_size=32,
    seq_len=16,
    tied=True,
    input_grad_scale=5.0,
    seed=0,
    steps=8,
    batch_size=4,
    lr=1e-2,
    warmup=2,
    min_lr_ratio=0.1,
    weight_decay=0.1,
    grad_clip=1.0,
    checkpoints=(0, 4, 8),
    eval_batches=2,
)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """Token arrays, sidecar and tokenizer on disk, as the training rule gets them."""
    root = tmp_path_factory.mktemp("inputs")
    ids = markov_tokens(22_000, V, seed=1)
    write_ids(ids[:20_000], root / "train.bin", V)
    write_ids(ids[20_000:], root / "val.bin", V)
    (root / "meta.json").write_text(json.dumps({"dtype": "uint16", "vocab_size": V, "eos_id": 0}))
    word_tokenizer(V).save_pretrained(root / "tokenizer")
    return {
        "train": str(root / "train.bin"),
        "val": str(root / "val.bin"),
        "meta": str(root / "meta.json"),
        "tokenizer": str(root / "tokenizer"),
    }


def outputs(root):
    return {
        "checkpoint_dirs": {s: root / f"step{s}" for s in SPEC.checkpoints},
        "log_path": root / "log.parquet",
        "provenance_path": root / "provenance.parquet",
    }


def read(root):
    return (
        pd.read_parquet(root / "log.parquet"),
        pd.read_parquet(root / "provenance.parquet"),
        {s: load_file(root / f"step{s}" / "model.safetensors") for s in SPEC.checkpoints},
    )


@pytest.fixture(scope="module")
def single(inputs, tmp_path_factory):
    root = tmp_path_factory.mktemp("single")
    train_from_files(SPEC, inputs, root / "work", log_every=100, **outputs(root))
    return read(root)


def test_two_ranks_killed_and_resumed_reproduce_one_process(single, inputs, tmp_path):
    launch(2, SPEC, inputs, tmp_path / "work", log_every=100, threads=2, until=6, **outputs(tmp_path))
    assert (tmp_path / "work" / "state.pt").exists() and not (tmp_path / "log.parquet").exists()
    launch(2, SPEC, inputs, tmp_path / "work", log_every=100, threads=2, **outputs(tmp_path))  # resumes from step 4
    assert not (tmp_path / "work").exists()
    log1, prov1, weights1 = single
    log2, prov2, weights2 = read(tmp_path)
    assert list(log2["step"]) == list(range(SPEC.steps + 1)) and list(prov2["step"]) == list(range(1, 9))
    np.testing.assert_allclose(log2["loss"], log1["loss"], rtol=1e-6)
    np.testing.assert_allclose(log2["val_loss"], log1["val_loss"], rtol=1e-5)
    for column in ("g_in_raw", "g_in", "g_out", "proxy", "out_share"):
        np.testing.assert_allclose(prov2[column], prov1[column], rtol=1e-5, err_msg=column)
    np.testing.assert_allclose(prov2["g_in"], 5.0 * prov2["g_in_raw"], rtol=1e-6)
    assert torch.equal(weights2[0]["model.embed_tokens.weight"], weights1[0]["model.embed_tokens.weight"])
    for step in (4, 8):
        assert weights2[step].keys() == weights1[step].keys()
        for key in weights1[step]:
            torch.testing.assert_close(weights2[step][key], weights1[step][key], rtol=1e-4, atol=1e-5)
    # the run moved: a no-op reduction (or none at all) could not pass the comparisons above
    assert not torch.allclose(weights2[8]["model.embed_tokens.weight"], weights2[0]["model.embed_tokens.weight"])


def test_uneven_batch_split_is_refused_before_starting(inputs, tmp_path):
    with pytest.raises(PipelineError, match="train.batch_size 4 is not a multiple of train.nproc 3"):
        launch(3, SPEC, inputs, tmp_path / "work", **outputs(tmp_path))
    assert not tmp_path.joinpath("work").exists()

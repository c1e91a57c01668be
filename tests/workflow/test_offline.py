"""Running the paper config with no network: the `hf` corpus from the hub cache, the lens dtype on CPU,
and one-value overrides from the command line."""

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import datasets
import pandas as pd
import pytest
import torch
import yaml
from helpers import build_corpus
from huggingface_hub import constants
from snakerun import ROOT, snakemake

from tying.errors import PipelineError
from tying.lens.unembed import lens_placement
from tying.plan.layers import typed_overrides

CARD = """---
configs:
- config_name: raw-v1
  data_files:
  - split: train
    path: raw-v1/train-*
  - split: validation
    path: raw-v1/validation-*
---
"""


def add_dataset_snapshot(cache_dir, repo_id, revision, files):
    """Store {path in repo: bytes} in the hub cache as dataset `repo_id` at `revision`, as
    `hf download --repo-type dataset` leaves it (blobs, snapshot symlinks, a ref)."""
    repo = Path(cache_dir) / f"datasets--{repo_id.replace('/', '--')}"
    commit = hashlib.sha1(f"{repo_id}@{revision}".encode()).hexdigest()
    for name, data in files.items():
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(data)
        link = repo / "snapshots" / commit / name
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(os.path.relpath(blob, link.parent), link)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / revision).write_text(commit)


def parquet_bytes(texts, path):
    pd.DataFrame({"text": texts}).to_parquet(path)
    return path.read_bytes()


@pytest.fixture
def offline(monkeypatch, tmp_path):
    """No network: HF_HUB_OFFLINE, an empty datasets cache and a hub cache at tmp_path/hub."""
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "datasets")
    return tmp_path / "hub"


MICRO = yaml.safe_load((ROOT / "tests" / "micro.yaml").read_text())
HF = {"source": "hf", "path": "org/wiki", "name": "raw-v1", "split": "train", "val_fraction": 0.2}


def test_hf_source_reads_the_hub_cache_offline(offline, tmp_path):
    shards = {
        f"raw-v1/train-0000{k}-of-00002.parquet": [f" shard {k} line {i} " for i in range(20)] + [""] for k in (0, 1)
    }
    files = {name: parquet_bytes(texts, tmp_path / f"{k}.parquet") for k, (name, texts) in enumerate(shards.items())}
    files["raw-v1/validation-00000-of-00001.parquet"] = parquet_bytes(["held out"], tmp_path / "v.parquet")
    add_dataset_snapshot(offline, "org/wiki", "main", {"README.md": CARD.encode(), **files})
    docs = build_corpus({**HF, "max_tokens": 100})
    # Rows in shard order with their stream positions as ids (the empty row 20 is skipped);
    # 25 four-word rows reach the 100-word budget.
    expected = [(f"org/wiki:{i}", f"shard 0 line {i}") for i in range(20)]
    expected += [(f"org/wiki:{21 + i}", f"shard 1 line {i}") for i in range(5)]
    assert list(zip(docs["doc_id"], docs["text"])) == expected


def test_hf_source_reads_a_pinned_revision_offline(offline, tmp_path):
    for revision, word in (("main", "new"), ("v1", "old")):
        data = parquet_bytes([f"{word} {i}" for i in range(10)], tmp_path / f"{revision}.parquet")
        add_dataset_snapshot(
            offline,
            "org/wiki",
            revision,
            {
                "README.md": CARD.encode(),
                "raw-v1/train-00000-of-00001.parquet": data,
                "raw-v1/validation-00000-of-00001.parquet": data,
            },
        )
    docs = build_corpus({**HF, "revision": "v1", "max_tokens": 1000})
    assert docs["text"].tolist() == [f"old {i}" for i in range(10)]


def test_hf_source_offline_without_a_copy_is_one_line(offline):
    with pytest.raises(PipelineError) as raised:
        build_corpus({**HF, "max_tokens": 100})
    assert str(raised.value) == (
        f"dataset org/wiki@main is not in the hub cache ({offline}) nor prepared in HF_DATASETS_CACHE and "
        "HF_HUB_OFFLINE is set: fetch it once with the network: hf download org/wiki --repo-type dataset"
    )


def test_hf_source_offline_with_a_partial_snapshot_is_one_line(offline, tmp_path):
    data = parquet_bytes(["text"], tmp_path / "t.parquet")
    add_dataset_snapshot(
        offline, "org/wiki", "main", {"README.md": CARD.encode(), "raw-v1/train-00000-of-00001.parquet": data}
    )
    with pytest.raises(PipelineError) as raised:
        build_corpus({**HF, "max_tokens": 100})
    snapshot = next((offline / "datasets--org--wiki" / "snapshots").iterdir())
    assert str(raised.value) == (
        f"cannot read dataset org/wiki@main from the hub cache "
        f"({snapshot}): Couldn't infer the same data file format for all splits. Got {{'train': ('parquet', {{}}), "
        "'validation': (None, {})} (files missing? fetch them: hf download org/wiki --repo-type dataset)"
    )


@pytest.mark.parametrize(
    "device,dtype,placed,note",
    [
        (
            "auto",
            "bfloat16",
            ("cpu", "float32"),
            "lens: no GPU, so lens.dtype bfloat16 runs as float32 on the CPU "
            "(set lens.device: cpu to keep bfloat16)\n",
        ),
        ("auto", "float32", ("cpu", "float32"), ""),
        ("cpu", "bfloat16", ("cpu", "bfloat16"), ""),
    ],
)
def test_lens_runs_float32_when_auto_finds_no_gpu(monkeypatch, capsys, device, dtype, placed, note):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert lens_placement(device, dtype) == placed
    assert capsys.readouterr().err == note


def test_lens_keeps_bfloat16_when_auto_finds_a_gpu(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert lens_placement("auto", "bfloat16") == ("cuda", "bfloat16")
    assert capsys.readouterr().err == ""


def test_config_overrides_are_read_as_yaml():
    # As Snakemake hands them over: --config "lens={steps: 30, lr: 0.5}" "seeds=[0, 1]" "name=x",
    # merged over the config file's values.
    overrides = {
        "lens": {"steps": "30", "lr": "0.5"},
        "seeds": ["0", "1"],
        "pairs": {"p": {"tied": {"hub": "org/m", "revision": "step1000"}}},
        "train": {"checkpoints": ["0", "2"], "dtype": "bfloat16"},
        "flag": "true",
    }
    config = {
        "lens": {"steps": "30", "lr": "0.5", "batch_size": 8},
        "seeds": ["0", "1"],
        "pairs": {"p": {"tied": {"hub": "org/m", "revision": "step1000"}}},
        "train": {"checkpoints": ["0", "2"], "dtype": "bfloat16", "steps": 10},
        "flag": "true",
    }
    typed_overrides(config, overrides)
    assert config == {
        "lens": {"steps": 30, "lr": 0.5, "batch_size": 8},
        "seeds": [0, 1],
        "pairs": {"p": {"tied": {"hub": "org/m", "revision": "step1000"}}},
        "train": {"checkpoints": [0, 2], "dtype": "bfloat16", "steps": 10},
        "flag": True,
    }
    assert type(config["lens"]["steps"]) is int


def test_nested_config_override_of_a_number_validates(tmp_path):
    # -1 reaches the schema as an integer: the error is the range, not "'-1' is not of type 'integer'".
    result = snakemake(tmp_path, "-n", "--config", "lens={steps: -1, lr: 0.5}", config=MICRO)
    assert result.returncode != 0
    assert result.stderr.splitlines()[-1] == "config error: lens.steps: -1 is less than the minimum of 1"


def test_a_second_configfile_merges_over_the_first(tmp_path):
    # `--configfile config.yaml change.yaml`, as docs/paper-scale.md says to change a few keys of a config.
    (tmp_path / "change.yaml").write_text("lens: {steps: -1}\n")
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(MICRO))
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(ROOT / "Snakefile"),
        "-d",
        str(tmp_path),
        "-n",
        "--replace-workflow-config",
        "--configfile",
        str(tmp_path / "config.yaml"),
        str(tmp_path / "change.yaml"),
    ]
    result = subprocess.run(cmd, capture_output=True, text=True)
    assert result.returncode != 0
    assert result.stderr.splitlines()[-1] == "config error: lens.steps: -1 is less than the minimum of 1"


def test_corpus_job_reads_the_hub_cache_with_hf_hub_offline(tmp_path):
    # The whole path a user runs: HF_HUB_OFFLINE and HF_HUB_CACHE in the environment, the corpus rule.
    data = parquet_bytes([f"line {i} of text" for i in range(40)], tmp_path / "t.parquet")
    add_dataset_snapshot(
        tmp_path / "hub",
        "org/wiki",
        "main",
        {
            "README.md": CARD.encode(),
            "raw-v1/train-00000-of-00001.parquet": data,
            "raw-v1/validation-00000-of-00001.parquet": data,
        },
    )
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_HUB_CACHE": str(tmp_path / "hub"),
        "HF_DATASETS_CACHE": str(tmp_path / "datasets"),
    }
    config = {**MICRO, "corpus": {**HF, "max_tokens": 60}}
    result = snakemake(tmp_path, "--until", "corpus", config=config, env=env)
    assert result.returncode == 0, result.stderr
    docs = pd.concat(map(pd.read_parquet, sorted((tmp_path / "results" / "corpus").glob("*.parquet"))))
    assert docs["doc_id"].tolist() == [f"org/wiki:{i}" for i in range(15)]  # 15 x 4 words = 60

"""Exported and fetched weight files are checked against the digests recorded when they were written."""

import json
import stat

import pytest
import torch
from conftest import tiny_model, word_tokenizer
from hubfixtures import add_snapshot, use_hub_cache

from tying.checkpoints.checkpoint_files import verify, weight_digests
from tying.checkpoints.embeddings import load_embeddings
from tying.errors import PipelineError
from tying.hub.fetch import fetch_model
from tying.train.loop import export
from tying.train.models import frozen_model


@pytest.fixture
def checkpoint(tmp_path):
    export(tiny_model(tied=False), word_tokenizer(64), tmp_path / "step6", {"step": 6})
    return tmp_path / "step6"


def rebuild_hint(directory):
    return f"; rebuild it with: snakemake --force {directory}"


def test_export_records_size_and_digest_and_an_intact_checkpoint_loads(checkpoint):
    weights = json.loads((checkpoint / "training.json").read_text())["weights"]
    assert list(weights) == ["model.safetensors"]
    assert weights == weight_digests(checkpoint)
    assert weights["model.safetensors"]["bytes"] == (checkpoint / "model.safetensors").stat().st_size
    verify(checkpoint, digests=True)
    assert load_embeddings(checkpoint).input.shape == (64, 16)


def test_a_truncated_weight_file_is_one_line_naming_it_and_its_rebuild(checkpoint):
    weights = checkpoint / "model.safetensors"
    size = weights.stat().st_size
    weights.write_bytes(weights.read_bytes()[: size // 2])
    message = f"{weights}: {size // 2} bytes, but {size} were written (truncated or replaced)" + rebuild_hint(
        checkpoint
    )
    for read in (load_embeddings, frozen_model):
        with pytest.raises(PipelineError) as error:
            read(checkpoint)
        assert str(error.value) == message


def test_a_changed_byte_is_caught_by_the_digest_unless_only_sizes_are_asked_for(checkpoint, monkeypatch):
    weights = checkpoint / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF
    weights.write_bytes(bytes(data))
    verify(checkpoint, digests=False)
    with pytest.raises(PipelineError) as error:
        load_embeddings(checkpoint)
    assert str(error.value) == (
        f"{weights}: contents differ from the SHA-256 recorded when it was written" + rebuild_hint(checkpoint)
    )
    monkeypatch.setattr("tying.checkpoints.checkpoint_files.DIGEST_LIMIT_BYTES", 100)  # too large to hash by default...
    verify(checkpoint)
    monkeypatch.setenv("TYING_VERIFY_DIGESTS", "1")  # ...unless asked for
    with pytest.raises(PipelineError, match="contents differ"):
        verify(checkpoint)


def test_a_missing_weight_file_is_named(checkpoint):
    (checkpoint / "model.safetensors").unlink()
    with pytest.raises(PipelineError) as error:
        verify(checkpoint)
    assert str(error.value) == f"{checkpoint / 'model.safetensors'}: missing" + rebuild_hint(checkpoint)


def test_an_unrecorded_damaged_file_is_still_one_line(checkpoint):
    (checkpoint / "training.json").unlink()  # not written by this pipeline: nothing to verify against
    weights = checkpoint / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-100])
    with pytest.raises(PipelineError, match=f"^{weights}: unreadable safetensors file") as error:
        load_embeddings(checkpoint)
    assert "\n" not in str(error.value)


def test_exported_weights_have_the_mode_of_every_other_output(checkpoint):
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in checkpoint.iterdir()}
    assert modes["model.safetensors"] == modes["config.json"]  # safetensors alone writes 0600
    assert len(set(modes.values())) == 1


@pytest.fixture
def hub_cache(tmp_path, monkeypatch):
    """A hub cache holding one tiny untied OLMo twice: as safetensors ("main") and as a torch zip .bin ("bin")."""
    model = tiny_model(tied=False)
    model.save_pretrained(tmp_path / "main")
    model.config.save_pretrained(tmp_path / "bin")
    torch.save(model.state_dict(), tmp_path / "bin" / "pytorch_model.bin")
    for revision in ("main", "bin"):
        word_tokenizer(64).save_pretrained(tmp_path / revision)
        add_snapshot(tmp_path / "cache", "test-org/tiny", revision, tmp_path / revision)
    use_hub_cache(monkeypatch, tmp_path / "cache")


@pytest.mark.parametrize("embeddings_only", [True, False])
def test_a_truncated_fetched_file_is_one_line(hub_cache, tmp_path, embeddings_only):
    dest = tmp_path / "fetched"
    record = fetch_model("test-org/tiny", "main", dest, embeddings_only=embeddings_only)
    weights = dest / "model.safetensors"
    assert record["weights"] == weight_digests(dest) and list(record["weights"]) == ["model.safetensors"]
    size = weights.stat().st_size
    with open(weights, "r+b") as f:
        f.truncate(size - 1)
    with pytest.raises(PipelineError) as error:
        (load_embeddings if embeddings_only else frozen_model)(dest)
    assert str(error.value) == f"{weights}: {size - 1} bytes, but {size} were written (truncated or replaced)" + (
        rebuild_hint(dest)
    )


@pytest.mark.parametrize("embeddings_only", [True, False])
def test_a_converted_bin_checkpoint_has_the_mode_of_every_other_output(hub_cache, tmp_path, embeddings_only):
    record = fetch_model("test-org/tiny", "bin", tmp_path / "fetched", embeddings_only=embeddings_only)
    assert record["converted_from"] == "pytorch_model.bin"
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (tmp_path / "fetched").iterdir()}
    assert modes["model.safetensors"] == modes["config.json"] and len(set(modes.values())) == 1
    verify(tmp_path / "fetched", digests=True)

"""Pinned-revision fetches from a fake hub cache: whole models, and embeddings read by byte range."""

import json
import os
import zipfile

import pandas as pd
import pytest
import torch
from fsspec.implementations.local import LocalFileSystem
from hubfixtures import (
    add_bin_repos,
    add_snapshot,
    bin_checkpoint,
    build_hub_cache,
    fake_paper_config,
    serve_hub,
    snapshot_dir,
    use_hub_cache,
    use_hub_server,
)
from safetensors.torch import load_file
from snakerun import snakemake
from transformers import AutoModelForCausalLM

from tying.checkpoints.embeddings import load_embeddings
from tying.errors import PipelineError
from tying.hub.fetch import fetch_model, plan_fetch
from tying.hub.torch_zip_ranges import ZIP_MAGIC

EXPECTED_TENSORS = {
    "test-org/olmo-untied": {"model.embed_tokens.weight", "lm_head.weight"},
    "test-org/pythia": {"gpt_neox.embed_in.weight", "embed_out.weight"},
    "test-org/gpt-neo": {"transformer.wte.weight"},
    "test-org/qwen3-tied": {"model.embed_tokens.weight"},
    "test-org/qwen3-untied-sharded": {"model.embed_tokens.weight", "lm_head.weight"},
}


class CountingFileSystem(LocalFileSystem):
    """The local file system, counting every byte read through it; `reads` lists the
    (file name, offset, length) of each read of an opened file."""

    cachable = False

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.bytes_read, self.reads = 0, []

    def _open(self, path, mode="rb", **kwargs):
        return _CountingFile(super()._open(path, mode, **kwargs), self, os.path.basename(path))

    def cp_file(self, path1, path2, **kwargs):
        self.bytes_read += os.path.getsize(path1)
        return super().cp_file(path1, path2, **kwargs)


class _CountingFile:
    def __init__(self, f, fs, name):
        self._f, self._fs, self._name = f, fs, name

    def read(self, length=-1):
        start = self._f.tell()
        data = self._f.read(length)
        self._fs.bytes_read += len(data)
        self._fs.reads.append((self._name, start, len(data)))
        return data

    def __getattr__(self, name):
        return getattr(self._f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._f.close()


@pytest.fixture(scope="session")
def hub_cache(tmp_path_factory):
    cache = tmp_path_factory.mktemp("hub")
    return cache, build_hub_cache(cache)


@pytest.fixture
def hub(hub_cache, monkeypatch):
    cache, commits = hub_cache
    use_hub_cache(monkeypatch, cache)
    return cache, commits


def original_tensors(cache, repo_id, commit):
    """Every tensor of the stored checkpoint, all shards together."""
    tensors = {}
    for path in snapshot_dir(cache, repo_id, commit).glob("*.safetensors"):
        tensors.update(load_file(path))
    return tensors


@pytest.mark.parametrize(
    "repo_id,revision",
    [
        ("test-org/olmo-untied", "step0"),
        ("test-org/pythia", "main"),
        ("test-org/gpt-neo", "main"),
        ("test-org/qwen3-tied", "main"),
        ("test-org/qwen3-untied-sharded", "main"),
    ],
)
def test_embedding_only_fetch_holds_the_stored_embedding_tensors(hub, tmp_path, repo_id, revision):
    cache, commits = hub
    commit = commits[repo_id][revision]
    record = fetch_model(repo_id, revision, tmp_path / "model", embeddings_only=True)

    fetched = load_file(tmp_path / "model" / "model.safetensors")
    original = original_tensors(cache, repo_id, commit)
    assert set(fetched) == EXPECTED_TENSORS[repo_id]
    for name, tensor in fetched.items():
        assert tensor.dtype == original[name].dtype
        assert torch.equal(tensor, original[name])
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        assert (tmp_path / "model" / name).read_bytes() == (snapshot_dir(cache, repo_id, commit) / name).read_bytes()
    assert json.loads((tmp_path / "model" / "source.json").read_text()) == record
    fetched_embeddings = load_embeddings(tmp_path / "model")
    stored_embeddings = load_embeddings(snapshot_dir(cache, repo_id, commit))
    assert fetched_embeddings.tied == stored_embeddings.tied == (len(EXPECTED_TENSORS[repo_id]) == 1)
    assert torch.equal(fetched_embeddings.input, stored_embeddings.input)
    assert torch.equal(fetched_embeddings.output, stored_embeddings.output)
    assert record["commit"] == commit and record["embeddings_only"] is True


def test_sharded_bf16_embeddings_stay_bf16(hub, tmp_path):
    fetch_model("test-org/qwen3-untied-sharded", "main", tmp_path / "model", embeddings_only=True)
    fetched = load_file(tmp_path / "model" / "model.safetensors")
    assert {t.dtype for t in fetched.values()} == {torch.bfloat16}
    assert fetched["lm_head.weight"].shape == (64, 48)


def test_embedding_only_fetch_reads_under_a_third_of_the_weights(hub, tmp_path):
    cache, commits = hub
    fs = CountingFileSystem()
    record = fetch_model("test-org/olmo-untied", "step0", tmp_path / "model", embeddings_only=True, fs=fs)

    weights = (
        snapshot_dir(cache, "test-org/olmo-untied", commits["test-org/olmo-untied"]["step0"]) / "model.safetensors"
    )
    assert fs.bytes_read == record["bytes_read"]
    assert 0 < fs.bytes_read < weights.stat().st_size / 3


def test_revisions_resolve_to_their_own_commits(hub, tmp_path):
    cache, commits = hub
    repo = "test-org/olmo-untied"
    records = {
        rev: fetch_model(repo, rev, tmp_path / rev, embeddings_only=True) for rev in ("step0", "step1000", "main")
    }
    by_commit = fetch_model(repo, commits[repo]["step0"], tmp_path / "by-commit", embeddings_only=True)

    assert records["step0"]["commit"] == commits[repo]["step0"] == by_commit["commit"]
    assert records["step1000"]["commit"] == commits[repo]["step1000"] == records["main"]["commit"]
    assert records["step0"]["commit"] != records["step1000"]["commit"]
    step0 = load_file(tmp_path / "step0" / "model.safetensors")["lm_head.weight"]
    step1000 = load_file(tmp_path / "step1000" / "model.safetensors")["lm_head.weight"]
    assert not torch.equal(step0, step1000)
    assert torch.equal(step0, load_file(tmp_path / "by-commit" / "model.safetensors")["lm_head.weight"])


def test_unknown_revision_is_one_clear_line(hub, tmp_path):
    with pytest.raises(PipelineError) as error:
        fetch_model("test-org/olmo-untied", "step999", tmp_path / "model", embeddings_only=True)
    assert str(error.value) == (
        "cannot fetch test-org/olmo-untied@step999: revision not found in the local hub cache (HF_HUB_OFFLINE is set)"
    )
    assert not (tmp_path / "model").exists()


@pytest.mark.parametrize("revision", ["main", "0" * 40])
def test_a_repository_absent_from_the_offline_cache_is_one_clear_line(hub, tmp_path, revision):
    with pytest.raises(PipelineError) as error:
        fetch_model("test-org/not-cached", revision, tmp_path / "model", embeddings_only=True)
    assert str(error.value) == (
        f"cannot fetch test-org/not-cached@{revision}: repository not in the local hub cache (HF_HUB_OFFLINE is set)"
    )


def test_unreachable_hub_is_one_clear_line(tmp_path, monkeypatch):
    use_hub_server(monkeypatch, "http://127.0.0.1:9", tmp_path / "empty-cache")  # closed port: refused at once
    with pytest.raises(PipelineError, match=r"^cannot fetch org/model@step0: hub unreachable \(offline\?\)"):
        fetch_model("org/model", "step0", tmp_path / "model", embeddings_only=False)


@pytest.fixture
def hub_server(hub_cache, tmp_path, monkeypatch):
    cache, commits = hub_cache
    with serve_hub(cache) as (endpoint, sent):
        use_hub_server(monkeypatch, endpoint, tmp_path / "empty-cache")
        yield cache, commits, sent


def test_online_embedding_fetch_downloads_only_byte_ranges(hub_server, tmp_path):
    cache, commits, sent = hub_server
    repo, commit = "test-org/olmo-untied", commits["test-org/olmo-untied"]["step0"]
    record = fetch_model(repo, "step0", tmp_path / "model", embeddings_only=True)

    weights = snapshot_dir(cache, repo, commit) / "model.safetensors"
    assert record["commit"] == commit
    assert sum(sent.values()) == record["bytes_read"]
    assert 0 < sent["model.safetensors"] < weights.stat().st_size / 3
    fetched = load_file(tmp_path / "model" / "model.safetensors")
    original = load_file(weights)
    assert all(torch.equal(fetched[name], original[name]) for name in EXPECTED_TENSORS[repo])


def test_online_sharded_embedding_fetch_touches_only_the_embedding_shards(hub_server, tmp_path):
    cache, commits, sent = hub_server
    repo = "test-org/qwen3-untied-sharded"
    fetch_model(repo, "main", tmp_path / "model", embeddings_only=True)

    index = json.loads((snapshot_dir(cache, repo, commits[repo]["main"]) / "model.safetensors.index.json").read_text())
    wanted = {index["weight_map"][name] for name in EXPECTED_TENSORS[repo]}
    assert {name for name in sent if name.endswith(".safetensors")} == wanted
    assert set(load_file(tmp_path / "model" / "model.safetensors")) == EXPECTED_TENSORS[repo]


def test_online_unknown_revision_is_one_clear_line(hub_server, tmp_path):
    with pytest.raises(PipelineError) as error:
        fetch_model("test-org/olmo-untied", "step999", tmp_path / "model", embeddings_only=True)
    assert str(error.value) == "cannot fetch test-org/olmo-untied@step999: revision not found"


def test_full_fetch_of_a_sharded_model_reproduces_its_files(hub, tmp_path):
    cache, commits = hub
    repo = "test-org/qwen3-untied-sharded"
    stored = {p.name: p.read_bytes() for p in snapshot_dir(cache, repo, commits[repo]["main"]).iterdir()}
    record = fetch_model(repo, "main", tmp_path / "model", embeddings_only=False)

    fetched = {p.name: p.read_bytes() for p in (tmp_path / "model").iterdir()}
    assert fetched.pop("source.json")
    assert fetched == stored
    assert sum(name.endswith(".safetensors") for name in fetched) == 5
    assert record["bytes_read"] == sum(len(data) for data in stored.values())


def test_a_failed_fetch_leaves_nothing_behind(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    (tmp_path / "config-only").mkdir()
    (tmp_path / "config-only" / "config.json").write_text("{}")
    add_snapshot(cache, "test-org/no-weights", "main", tmp_path / "config-only")
    use_hub_cache(monkeypatch, cache)
    (tmp_path / "out").mkdir()
    with pytest.raises(PipelineError) as error:
        fetch_model("test-org/no-weights", "main", tmp_path / "out" / "model", embeddings_only=True)
    assert str(error.value) == (
        "cannot fetch test-org/no-weights@main: no model.safetensors or pytorch_model.bin"
        " (single or sharded with an .index.json) at this revision"
    )
    assert list((tmp_path / "out").iterdir()) == []


BIN_EMBEDDINGS = {
    "test-org/gpt-neo-bin": {"transformer.wte.weight"},  # its lm_head.weight is the same tensor: dropped
    "test-org/pythia-bin": {"gpt_neox.embed_in.weight", "embed_out.weight"},
    "test-org/pythia-bin-sharded": {"gpt_neox.embed_in.weight", "embed_out.weight"},
}
BIN_SHARDS_READ = {
    "test-org/gpt-neo-bin": "pytorch_model.bin",
    "test-org/pythia-bin": "pytorch_model.bin",
    "test-org/pythia-bin-sharded": ["pytorch_model-00001-of-00003.bin", "pytorch_model-00003-of-00003.bin"],
}


@pytest.fixture(scope="session")
def bin_commits(hub_cache):
    return add_bin_repos(hub_cache[0])


def snapshot_sizes(cache, repo_id, commit):
    return {p.name: p.stat().st_size for p in snapshot_dir(cache, repo_id, commit).iterdir()}


@pytest.mark.parametrize("repo_id", sorted(BIN_EMBEDDINGS))
def test_embedding_only_fetch_of_a_bin_checkpoint_converts_just_the_embeddings(hub, bin_commits, tmp_path, repo_id):
    record = fetch_model(repo_id, "main", tmp_path / "model", embeddings_only=True)

    _, stored = bin_checkpoint(repo_id)
    fetched = load_file(tmp_path / "model" / "model.safetensors")
    assert set(fetched) == BIN_EMBEDDINGS[repo_id]
    for name, tensor in fetched.items():
        assert tensor.dtype == stored[name].dtype
        assert torch.equal(tensor, stored[name])
    assert record["converted_from"] == BIN_SHARDS_READ[repo_id]
    assert json.loads((tmp_path / "model" / "source.json").read_text()) == record
    assert {p.name for p in (tmp_path / "model").iterdir()} == {
        "config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "model.safetensors",
        "source.json",
    }
    embeddings = load_embeddings(tmp_path / "model")
    tied = repo_id == "test-org/gpt-neo-bin"
    assert embeddings.tied == tied
    in_name = "transformer.wte.weight" if tied else "gpt_neox.embed_in.weight"
    assert torch.equal(embeddings.input, stored[in_name].float())
    assert tied or torch.equal(embeddings.output, stored["embed_out.weight"].float())


def zip_entries_read(path, reads):
    """Names of the entries of the zip archive `path` (local header and data) that one of `reads`
    ((offset, length) pairs) overlaps; a read of the central directory or end record names none."""
    with zipfile.ZipFile(path) as archive:
        infos = sorted(archive.infolist(), key=lambda info: info.header_offset)
        ends = [info.header_offset for info in infos[1:]] + [archive.start_dir]
    return {
        info.filename.split("/", 1)[1]
        for info, end in zip(infos, ends)
        for offset, length in reads
        if length and offset < end and info.header_offset < offset + length
    }


@pytest.mark.parametrize("repo_id", ["test-org/pythia-bin", "test-org/pythia-bin-sharded"])
def test_a_zip_bin_checkpoint_is_read_at_its_index_and_embedding_storages_only(hub, bin_commits, tmp_path, repo_id):
    cache, _ = hub
    fs = CountingFileSystem()
    record = fetch_model(repo_id, "main", tmp_path / "model", embeddings_only=True, fs=fs)

    folder = snapshot_dir(cache, repo_id, bin_commits[repo_id])
    _, stored = bin_checkpoint(repo_id)
    bins = [p for p in sorted(folder.iterdir()) if p.suffix == ".bin"]
    for path in bins:
        reads = [(offset, length) for name, offset, length in fs.reads if name == path.name]
        entries = zip_entries_read(path, reads)
        with zipfile.ZipFile(path) as archive:
            index = torch.load(path, weights_only=True, map_location="meta")
            in_shard = [name for name in BIN_EMBEDDINGS[repo_id] if name in index]
            data_read = sorted(archive.getinfo(f"{path.stem}/{e}").file_size for e in entries if e.startswith("data/"))
        if not in_shard:
            assert reads == []  # pytorch_model-00002-of-00003.bin: not opened
            continue
        assert entries == {"data.pkl", "byteorder"} | {e for e in entries if e.startswith("data/")}
        assert data_read == sorted(stored[name].nbytes for name in in_shard)
    weights = sum(p.stat().st_size for p in bins)
    assert fs.bytes_read == record["bytes_read"] < weights / 2
    assert record["bytes_read"] == plan_fetch(repo_id, "main", embeddings_only=True, fs=fs)["bytes"]


def test_a_legacy_bin_checkpoint_is_read_whole(hub, bin_commits, tmp_path):
    cache, _ = hub
    repo = "test-org/gpt-neo-bin"
    record = fetch_model(repo, "main", tmp_path / "model", embeddings_only=True)

    size = (snapshot_dir(cache, repo, bin_commits[repo]) / "pytorch_model.bin").stat().st_size
    assert record["bytes_read"] - len(ZIP_MAGIC) - size == sum(
        n for name, n in snapshot_sizes(cache, repo, bin_commits[repo]).items() if name != "pytorch_model.bin"
    )


@pytest.mark.parametrize("repo_id", sorted(BIN_EMBEDDINGS))
def test_full_fetch_of_a_bin_checkpoint_loads_as_the_original_model(hub, bin_commits, tmp_path, repo_id):
    cache, _ = hub
    record = fetch_model(repo_id, "main", tmp_path / "model", embeddings_only=False)

    original, stored = bin_checkpoint(repo_id)
    fetched = load_file(tmp_path / "model" / "model.safetensors")
    assert set(fetched) == set(stored) - ({"lm_head.weight"} if original.config.tie_word_embeddings else set())
    assert all(torch.equal(fetched[name], stored[name]) for name in fetched)
    assert record["bytes_read"] == sum(snapshot_sizes(cache, repo_id, bin_commits[repo_id]).values())
    assert record["converted_from"] == (
        "pytorch_model.bin"
        if repo_id != "test-org/pythia-bin-sharded"
        else [f"pytorch_model-0000{k}-of-00003.bin" for k in (1, 2, 3)]
    )
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path / "model").state_dict()
    expected = original.state_dict()
    assert set(loaded) == set(expected)
    for name, tensor in expected.items():
        assert torch.equal(loaded[name].to(tensor.dtype), tensor), name


@pytest.mark.parametrize("repo_id", ["test-org/gpt-neo-bin", "test-org/pythia-bin-sharded"])
def test_online_bin_embedding_fetch_downloads_ranges_of_zip_shards_and_legacy_files_whole(
    bin_commits, hub_server, tmp_path, repo_id
):
    cache, _, sent = hub_server
    record = fetch_model(repo_id, "main", tmp_path / "model", embeddings_only=True)

    shards = BIN_SHARDS_READ[repo_id]
    shards = [shards] if isinstance(shards, str) else shards
    sizes = snapshot_sizes(cache, repo_id, bin_commits[repo_id])
    assert {name for name in sent if name.endswith(".bin")} == set(shards)
    assert sum(sent.values()) == record["bytes_read"]
    if repo_id == "test-org/gpt-neo-bin":
        assert sent["pytorch_model.bin"] == len(ZIP_MAGIC) + sizes["pytorch_model.bin"]
    else:
        assert all(0 < sent[shard] < sizes[shard] / 2 for shard in shards)
    assert record["commit"] == bin_commits[repo_id]
    _, stored = bin_checkpoint(repo_id)
    fetched = load_file(tmp_path / "model" / "model.safetensors")
    assert set(fetched) == BIN_EMBEDDINGS[repo_id]
    assert all(torch.equal(fetched[name], stored[name]) for name in fetched)
    assert not [p.name for p in (tmp_path / "model").iterdir() if p.is_dir() or p.suffix == ".bin"]


def test_a_bin_that_is_not_plain_weights_is_refused_in_one_line(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    (tmp_path / "pickle").mkdir()
    (tmp_path / "pickle" / "config.json").write_text("{}")
    torch.save(torch.nn.Linear(2, 2), tmp_path / "pickle" / "pytorch_model.bin")  # a whole module, not a state dict
    add_snapshot(cache, "test-org/pickle", "main", tmp_path / "pickle")
    use_hub_cache(monkeypatch, cache)
    with pytest.raises(
        PipelineError,
        match=r"^cannot fetch test-org/pickle@main: pytorch_model\.bin: not loadable as "
        r"a weights-only torch checkpoint: [^\n]+$",
    ):
        fetch_model("test-org/pickle", "main", tmp_path / "out" / "model", embeddings_only=True)


@pytest.mark.parametrize("embeddings_only", [True, False])
@pytest.mark.parametrize("repo_id", [*sorted(EXPECTED_TENSORS), *sorted(BIN_EMBEDDINGS)])
def test_the_plan_states_the_bytes_a_fetch_reads_from_each_file(hub, bin_commits, tmp_path, repo_id, embeddings_only):
    cache, commits = hub
    revision = "step0" if repo_id == "test-org/olmo-untied" else "main"
    plan = plan_fetch(repo_id, revision, embeddings_only)
    record = fetch_model(repo_id, revision, tmp_path / "model", embeddings_only)

    assert plan["bytes"] == record["bytes_read"] == sum(plan["files"].values())
    assert plan["commit"] == record["commit"]
    sizes = snapshot_sizes(cache, repo_id, plan["commit"])
    assert all(0 < n <= sizes[name] + len(ZIP_MAGIC) for name, n in plan["files"].items())
    weights = {name for name in sizes if name.endswith((".safetensors", ".bin"))}
    assert embeddings_only or weights <= set(plan["files"])


def test_the_plan_of_an_online_fetch_is_what_the_hub_sends(bin_commits, hub_server, tmp_path):
    _, _, sent = hub_server
    for repo_id in ("test-org/qwen3-untied-sharded", "test-org/pythia-bin"):
        plan = plan_fetch(repo_id, "main", embeddings_only=True)
        sent.clear()
        fetch_model(repo_id, "main", tmp_path / repo_id, embeddings_only=True)
        assert dict(sent) == plan["files"]


def test_the_download_plan_target_sizes_every_fetch_job_of_every_target(hub_cache, bin_commits, tmp_path):
    cache, _ = hub_cache
    (tmp_path / "corpus.jsonl").write_text('{"text": "t1 t2"}\n')
    config = {
        **fake_paper_config(tmp_path / "corpus.jsonl"),
        "figures": {"fig3": "main"},
        "tables": {"table5": ["scale"]},
    }
    config["pairs"]["scale"]["untied"] = {"hub": "test-org/pythia-bin"}
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(cache), "HF_HOME": str(tmp_path / "hf-home")}
    result = snakemake(tmp_path, "results/hub/download_plan.tsv", config=config, env=env)
    assert result.returncode == 0, result.stderr[-3000:]

    table = pd.read_csv(tmp_path / "results/hub/download_plan.tsv", sep="\t")
    jobs = table.groupby(["target", "rule", "repo_id", "revision"], sort=False)["bytes"].sum()
    expected = {
        ("figures/fig3.pdf", "hub_embeddings", "test-org/olmo-untied", "step0"),
        ("figures/fig3.pdf", "hub_embeddings", "test-org/olmo-untied", "step1000"),
        ("results/tables/table5.csv", "hub_embeddings", "test-org/qwen3-tied", "main"),
        ("results/tables/table5.csv", "hub_embeddings", "test-org/pythia-bin", "main"),
    }
    assert set(jobs.index) == expected
    with pytest.MonkeyPatch.context() as monkeypatch:
        use_hub_cache(monkeypatch, cache)
        for (_, _, repo_id, revision), nbytes in jobs.items():
            assert (
                nbytes == fetch_model(repo_id, revision, tmp_path / "fetched" / repo_id / revision, True)["bytes_read"]
            )
    assert set(table["status"]) == {"missing"}
    summary = (tmp_path / "results/hub/download_plan.md").read_text().splitlines()
    fig3 = jobs.loc["figures/fig3.pdf"].sum()
    assert f"| figures/fig3.pdf | 2 | {fig3:,} | {fig3 / 1e9:.2f} |" in summary
    distinct = jobs.droplevel(0)
    distinct = distinct[~distinct.index.duplicated()].sum()
    assert summary[-1] == f"| all of them | 4 | {distinct:,} | {distinct / 1e9:.2f} |"

"""The corpus and its tokens in shards: the same stream as one shard, streamed, read across shards."""

import json
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import word_tokenizer
from shardfixtures import V, build_tokens, write_local_corpus
from snakerun import ROOT, planned_jobs, snakemake

from tying.data.batches import eval_batches, train_batch
from tying.data.shards import block, read_texts, shard_documents, write_documents
from tying.data.tokens import ShardedIds, load_ids
from tying.errors import PipelineError
from tying.plan.layers import load


@pytest.fixture(scope="module")
def corpus_files(tmp_path_factory):
    return write_local_corpus(tmp_path_factory.mktemp("corpus"), n_files=7, docs_per_file=40)


def test_several_shards_give_the_token_stream_of_one_shard(corpus_files, tmp_path):
    one = build_tokens(
        {"source": "local", "paths": corpus_files, "val_fraction": 0.1, "shards": 1},
        tmp_path / "one",
        word_tokenizer(V),
    )
    three = build_tokens(
        {"source": "local", "paths": corpus_files, "val_fraction": 0.1, "shards": 3},
        tmp_path / "three",
        word_tokenizer(V),
    )
    meta = json.loads(three["meta.json"].read_text())
    assert meta["shards"] == 3 and meta == {**json.loads(one["meta.json"].read_text()), "shards": 3}
    manifest = json.loads(three["train.json"].read_text())["shards"]
    assert [s["path"] for s in manifest] == ["shard0/train.bin", "shard1/train.bin", "shard2/train.bin"]
    for split in ("train", "val"):
        flat = np.asarray(load_ids(one[f"{split}.json"], one["meta.json"]))
        sharded = load_ids(three[f"{split}.json"], three["meta.json"])
        assert isinstance(sharded, ShardedIds) and len(sharded.parts) == 3
        assert len(flat) == meta["tokens"][split] > 0 and np.array_equal(np.asarray(sharded), flat)
    pd.testing.assert_frame_equal(pd.read_parquet(one["counts.parquet"]), pd.read_parquet(three["counts.parquet"]))
    # training batches read across the shard boundaries, the same as from one array
    flat = np.asarray(load_ids(one["train.json"], one["meta.json"]))
    sharded = load_ids(three["train.json"], three["meta.json"])
    for step in range(1, 30):
        for a, b in zip(train_batch(flat, step, 0, 8, 64), train_batch(sharded, step, 0, 8, 64)):
            assert a.equal(b)
    for (xa, ya), (xb, yb) in zip(eval_batches(flat, 4, 8, 64), eval_batches(sharded, 4, 8, 64)):
        assert xa.equal(xb) and ya.equal(yb)
    assert sharded.max() == flat.max() and sharded.dtype == np.uint16


def test_sharded_ids_slice_like_one_array():
    rng = np.random.default_rng(1)
    parts = [rng.integers(0, 100, n).astype(np.uint16) for n in (5, 0, 1, 17, 3)]
    ids, flat = ShardedIds(parts), np.concatenate(parts)
    assert len(ids) == len(flat) == 26
    for a in range(-3, 28):
        for b in range(a, 30):
            assert np.array_equal(ids[a:b], flat[a:b]), (a, b)
    with pytest.raises(TypeError, match="contiguous slices only"):
        ids[::2]


@pytest.mark.parametrize(
    "n,expected", [(1, [[0, 1, 2, 3, 4, 5, 6]]), (3, [[0, 1, 2], [3, 4], [5, 6]]), (7, [[i] for i in range(7)])]
)
def test_blocks_are_contiguous_and_the_first_ones_longer(n, expected):
    assert [block(list(range(7)), n, k) for k in range(n)] == expected


class FakeStream:
    """A streaming dataset of `files` data files of `rows` rows each, sharded as datasets does."""

    def __init__(self, files, rows=10, first=0):
        self.files, self.rows, self.first = files, rows, first

    @property
    def num_shards(self):
        return len(self.files)

    def shard(self, num_shards, index):
        return FakeStream(block(self.files, num_shards, index), self.rows)

    def __iter__(self):
        return iter({"text": f"file{f} row{r} words"} for f in self.files for r in range(self.rows))


def test_hf_shards_stream_their_block_of_files_with_their_share_of_the_budget(monkeypatch):
    monkeypatch.setattr("tying.data.corpus.hf_rows", lambda *args: FakeStream(list(range(4))))
    corpus = {"source": "hf", "path": "org/data", "max_tokens": 45, "shards": 2}
    docs = [list(shard_documents(corpus, k)) for k in range(2)]
    # 45 words / 2 shards -> each stops once 23 words (8 rows of 3) are read, from its own files
    assert [text for _, text in docs[0]] == [f"file0 row{r} words" for r in range(8)]
    assert [text for _, text in docs[1]] == [f"file2 row{r} words" for r in range(8)]
    assert docs[1][0][0] == "org/data:1:0"
    one = list(shard_documents({**corpus, "shards": 1, "max_tokens": 10**6}, 0))
    assert one[0][0] == "org/data:0" and len(one) == 40
    with pytest.raises(
        PipelineError, match=r"^dataset org/data \[train\] has 4 data files, fewer than corpus.shards \(5\)$"
    ):
        list(shard_documents({**corpus, "shards": 5}, 0))


def test_an_empty_shard_and_a_split_without_documents_are_one_line_errors(tmp_path):
    with pytest.raises(PipelineError, match="corpus shard .*shard0.parquet has no documents"):
        write_documents(iter([]), tmp_path / "shard0.parquet", 0.1)
    assert not (tmp_path / "shard0.parquet").exists()
    paths = write_local_corpus(tmp_path, n_files=1, docs_per_file=3)
    with pytest.raises(PipelineError, match=r"the corpus's 1 shard\(s\) hold no val tokens"):
        build_tokens(
            {"source": "local", "paths": paths, "val_fraction": 0.0001, "shards": 1},
            tmp_path / "out",
            word_tokenizer(V),
        )


MEMORY_PROBE = textwrap.dedent("""
    import sys, tracemalloc
    from pathlib import Path
    import pandas, pyarrow  # before tracemalloc starts: the stages import pandas where they use it
    import tying.data.shards
    from shardfixtures import build_tokens, write_local_corpus
    from tying.data.shards import read_texts
    from tying.data.tokenizer import train_bpe

    tying.data.shards.ROW_GROUP_BYTES = 16 * 1024
    folder = Path(sys.argv[1])
    paths = write_local_corpus(folder, n_files=3, docs_per_file=1500, words=(100, 400))
    tok = train_bpe([Path(paths[0]).read_text()[:300_000]], 1024)
    tracemalloc.start()
    build_tokens({"source": "local", "paths": paths, "val_fraction": 0.05, "shards": 3}, folder / "out", tok)
    print(sum(Path(p).stat().st_size for p in paths), tracemalloc.get_traced_memory()[1],
          pyarrow.default_memory_pool().max_memory())
""")


def test_no_stage_holds_the_corpus_in_memory(tmp_path):
    """Peak Python (strings, numpy ids) and Arrow memory of the corpus, tokens and join stages, in a
    fresh process, against the corpus's size: held whole, its text alone would exceed the cap."""
    result = subprocess.run(
        [sys.executable, "-c", MEMORY_PROBE, str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=ROOT / "tests",
        env={"PYTHONPATH": f"{ROOT / 'tests'}:{ROOT / 'src'}"},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    corpus_bytes, python_peak, arrow_peak = map(int, result.stdout.split())
    tokens = json.loads((tmp_path / "out" / "meta.json").read_text())["tokens"]
    assert corpus_bytes > 2 * 2**20 and sum(tokens.values()) > 400_000
    assert python_peak + arrow_peak < corpus_bytes / 4, (python_peak, arrow_peak, corpus_bytes)


def test_paper_train_dry_run_plans_one_tokenization_job_per_shard(tmp_path):
    config = load("configs/paper-train.yaml")
    result = snakemake(tmp_path, "-n", "results/tokens/meta.json", config=config)
    assert result.returncode == 0, result.stderr[-2000:]
    n = config["corpus"]["shards"]
    assert n > 1 and planned_jobs(result) == {"corpus": n, "tokenizer": 1, "tokens_shard": n, "tokens": 1}
    drawn = 10_000 * 512 * 4096
    assert f"each training run draws 10000 x 512 x 4096 = {drawn:,} tokens" in result.stdout
    # every whitespace word is at least one token, so a budget of `drawn` words is enough for one pass
    assert config["corpus"]["max_tokens"] >= drawn
    assert f"the corpus streams up to {config['corpus']['max_tokens']:,} words" in result.stdout


@pytest.mark.parametrize(
    "corpus,message",
    [
        ({"source": "stdlib", "shards": 2}, "corpus.shards: 2 shards of the stdlib source, which is one part (use 1)"),
        (
            {"source": "local", "paths": ["a.txt", "b.txt"], "shards": 3},
            "corpus.shards: 3 shards of 2 local files (a shard is a block of whole files)",
        ),
    ],
)
def test_shards_the_source_cannot_give_stop_the_config_in_one_line(tmp_path, corpus, message):
    config = yaml.safe_load((ROOT / "tests" / "micro.yaml").read_text())
    result = snakemake(tmp_path, "-n", config={**config, "corpus": corpus})
    assert result.returncode != 0
    assert f"config error: {message}" in result.stderr.splitlines()


def test_read_texts_streams_one_split(corpus_files, tmp_path):
    corpus = {"source": "local", "paths": corpus_files[:2], "val_fraction": 0.2, "shards": 1}
    counts = write_documents(shard_documents(corpus, 0), tmp_path / "s.parquet", 0.2)
    texts = list(read_texts([tmp_path / "s.parquet"], "val"))
    assert len(texts) == counts["val"] > 0 and counts["train"] + counts["val"] == 80

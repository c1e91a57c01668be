import json

import numpy as np
import pandas as pd
import pytest
from helpers import build_corpus, tokenize_corpus

from tying.data import tokenizer
from tying.data.corpus import split_of
from tying.data.tokenizer import train_bpe
from tying.data.tokens import load_ids
from tying.errors import PipelineError


@pytest.fixture(scope="module")
def stdlib_corpus():
    return build_corpus({"source": "stdlib", "val_fraction": 0.05})


def test_stdlib_corpus_is_deterministic_and_split_by_document(stdlib_corpus):
    again = build_corpus({"source": "stdlib", "val_fraction": 0.05})
    pd.testing.assert_frame_equal(stdlib_corpus, again)
    assert 1.5e6 < stdlib_corpus["text"].str.len().sum() < 3e6
    assert stdlib_corpus["doc_id"].is_unique
    val = stdlib_corpus["split"] == "val"
    assert 0.02 < val.mean() < 0.1
    assert all(split_of(d, 0.05) == s for d, s in zip(stdlib_corpus["doc_id"], stdlib_corpus["split"]))


def test_split_depends_on_the_document_alone():
    ids = [f"doc{i}" for i in range(2000)]
    first = [split_of(d, 0.1) for d in ids]
    assert first == [split_of(d, 0.1) for d in reversed(ids)][::-1]
    assert 0.07 < first.count("val") / len(ids) < 0.13


def test_local_sources_and_a_missing_file(tmp_path):
    (tmp_path / "a.txt").write_text("plain text document")
    (tmp_path / "b.jsonl").write_text("\n".join(json.dumps({"text": f"line {i}"}) for i in range(50)))
    pd.DataFrame({"text": [f"row {i}" for i in range(50)]}).to_parquet(tmp_path / "c.parquet")
    paths = [str(tmp_path / n) for n in ("a.txt", "b.jsonl", "c.parquet")]
    docs = build_corpus({"source": "local", "paths": paths, "val_fraction": 0.2})
    assert len(docs) == 101 and set(docs["split"]) == {"train", "val"}
    with pytest.raises(PipelineError, match="corpus file not found: .*missing.txt"):
        build_corpus({"source": "local", "paths": [str(tmp_path / "missing.txt")]})


def test_tokenizer_round_trips_and_tokens_are_counted(stdlib_corpus, tmp_path):
    train_text = stdlib_corpus.loc[stdlib_corpus["split"] == "train", "text"]
    tok = train_bpe(train_text, 512)
    assert len(tok) == 512
    sample = stdlib_corpus["text"].iloc[7] + " Ünïcode ✓ tabs\tand\nlines"
    assert tok.decode(tok(sample)["input_ids"]) == sample
    small = stdlib_corpus.iloc[:40]
    out = {k: tmp_path / k for k in ("train.bin", "val.bin", "meta.json", "counts.parquet")}
    tokenize_corpus(small, tok, *out.values())
    meta = json.loads(out["meta.json"].read_text())
    train_ids = load_ids(out["train.bin"], out["meta.json"])
    assert train_ids.dtype == np.uint16 and len(train_ids) == meta["tokens"]["train"]
    n_docs = (small["split"] == "train").sum()
    assert (np.asarray(train_ids) == tok.eos_token_id).sum() == n_docs
    counts = pd.read_parquet(out["counts.parquet"])
    assert len(counts) == 512 and counts["count"].sum() == len(train_ids)
    assert counts.loc[counts["token_id"] == tok.eos_token_id, "count"].item() == n_docs


def test_a_saved_bpe_loads_as_autotokenizer_loads_it_and_another_class_through_autotokenizer(
    stdlib_corpus, tmp_path, monkeypatch
):
    import transformers

    tokenizer.save(train_bpe(stdlib_corpus["text"].iloc[:200], 300), tmp_path / "tok")
    fast, auto = tokenizer.load(tmp_path / "tok"), transformers.AutoTokenizer.from_pretrained(tmp_path / "tok")
    sample = [stdlib_corpus["text"].iloc[3], "Ünïcode ✓ tabs\tand\nlines"]
    assert type(fast) is type(auto) and (len(fast), fast.eos_token_id) == (len(auto), auto.eos_token_id) == (300, 0)
    assert fast(sample, add_special_tokens=False)["input_ids"] == auto(sample, add_special_tokens=False)["input_ids"]
    config = tmp_path / "tok" / "tokenizer_config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "tokenizer_class": "Qwen2Tokenizer"}))
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", lambda path: ("auto", path))
    assert tokenizer.load(tmp_path / "tok") == ("auto", tmp_path / "tok")


def test_hf_source_streams_up_to_the_token_budget(monkeypatch):
    rows = [{"text": ""}] + [{"text": f"document {i}"} for i in range(40)]
    calls = []

    def fake_load_dataset(path, name, split, revision, streaming):
        calls.append((path, name, split, revision, streaming))
        return iter(rows)

    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
    monkeypatch.setattr("datasets.load_dataset", fake_load_dataset)
    docs = build_corpus({"source": "hf", "path": "org/data", "name": "cfg", "max_tokens": 30, "val_fraction": 0.3})
    assert calls == [("org/data", "cfg", "train", None, True)]
    assert docs["text"].tolist() == [f"document {i}" for i in range(15)]  # stops once 30 words are read


@pytest.mark.parametrize(
    "error,message",
    [
        (ConnectionError("offline"), "cannot stream dataset org/data/cfg [train]: ConnectionError: offline"),
        (None, "dataset org/data/cfg [train] has no field 'body' (corpus.text_field)"),
    ],
)
def test_hf_source_problems_are_one_line(monkeypatch, error, message):
    def fake_load_dataset(*args, **kwargs):
        if error:
            raise error
        return iter([{"text": "x"}])

    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
    monkeypatch.setattr("datasets.load_dataset", fake_load_dataset)
    with pytest.raises(PipelineError) as raised:
        build_corpus({"source": "hf", "path": "org/data", "name": "cfg", "max_tokens": 5, "text_field": "body"})
    assert str(raised.value) == message

"""The docstrings corpus source: installed distributions' docstrings, the same documents and hash each build."""

import copy

import pytest
import yaml
from helpers import build_corpus
from snakerun import ROOT

from tying.data.corpus import Digest, distribution_versions, docstring_documents, split_of
from tying.data.shards import shard_documents
from tying.errors import PipelineError
from tying.plan.checks import check

SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
MICRO = yaml.safe_load((ROOT / "tests" / "micro.yaml").read_text())
SMALL = ["pluggy", "iniconfig"]  # pure Python, pinned in constraints.txt (pytest's dependencies)


def test_two_builds_give_the_same_documents_size_and_hash():
    first, second = Digest(docstring_documents(SMALL)), Digest(docstring_documents(SMALL))
    assert list(first) == list(second)
    assert (
        first.summary()
        == second.summary()
        == ("14 documents, 16,682 characters, sha256 335a1c051b0d57e7a8e573422443dca85c10e5a0323be4d8426eac8540fe95b3")
    )
    assert distribution_versions(SMALL) == "pluggy 1.7.0, iniconfig 2.3.1"


def test_documents_are_files_in_distribution_then_path_order_split_by_id():
    corpus = {"source": "docstrings", "distributions": SMALL, "val_fraction": 0.2}
    docs = build_corpus(corpus)
    assert docs["doc_id"].iloc[0] == "docstrings:pluggy:pluggy/_caller.py"
    assert docs["doc_id"].iloc[-1] == "docstrings:iniconfig:iniconfig/_parse.py"
    assert docs["text"].iloc[-1].startswith("Parse INI data and return sections and sources mappings.")
    assert list(docs["split"]) == [split_of(d, 0.2) for d in docs["doc_id"]] and (docs["split"] == "val").sum() == 2
    shards = [list(shard_documents({**corpus, "shards": 2}, k)) for k in range(2)]  # one distribution each
    assert [len(s) for s in shards] == [12, 2]
    assert shards[0] + shards[1] == list(zip(docs["doc_id"], docs["text"]))


def test_a_missing_distribution_is_one_line():
    with pytest.raises(PipelineError, match=r"^corpus.distributions: 'no-such-dist' is not installed \(pip install"):
        list(docstring_documents(["no-such-dist"]))


def test_the_schema_names_distributions_for_the_docstrings_source_only():
    config = copy.deepcopy(MICRO)
    config["corpus"] = {"source": "docstrings"}
    check(config, SCHEMA)
    assert config["corpus"]["distributions"][:3] == ["torch", "transformers", "tokenizers"]
    assert len(config["corpus"]["distributions"]) == 17
    config["corpus"] = {"source": "stdlib"}
    check(config, SCHEMA)
    assert "distributions" not in config["corpus"]

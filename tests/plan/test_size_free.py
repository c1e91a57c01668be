"""The regimes' size-free numbers (tying.plan.size_free): a planted config's against hand-computed values, the
paper-regime cell's against the paper's, and docs/methods.md's table against the package."""

import math
import re

import pytest
import yaml
from snakerun import ROOT

from tying.errors import PipelineError
from tying.plan.config import prepared
from tying.plan.size_free import COLUMNS, formatted, regime_rows, size_free

PLANTED = {
    "workdir": "planted",
    "tokenizer": {"vocab_size": 256},
    "model": {"hidden_size": 16, "layers": 1, "heads": 2, "intermediate_size": 64, "seq_len": 8},
    "train": {
        "steps": 4,
        "batch_size": 2,
        "lr": 0.01,
        "warmup": 1,
        "min_lr_ratio": 0.5,
        "weight_decay": 0.2,
        "checkpoints": [0, 4],
    },
    "architectures": {"gpt_neox": None, "olmo_wide": None},
    "pairs": {"main": {"tied": {"arch": "olmo", "variant": "tied"}, "untied": {"arch": "olmo", "variant": "untied"}}},
    "figures": {},
    "tables": {"claims": ["main"]},
}


def planted(tmp_path, **train):
    path = tmp_path / "planted.yaml"
    path.write_text(yaml.safe_dump({**PLANTED, "train": {**PLANTED["train"], **train}}))
    return prepared(path).config


def test_a_planted_configs_size_free_numbers_equal_their_hand_computed_values(tmp_path):
    # warmup 1 of 4 steps, cosine to half the peak: factors 1, then 1, 0.875, 0.625 (at 0, 1/3, 2/3 of the way)
    lrs = [
        0.01 * f for f in (1, 1, 0.5 + 0.25 * (1 + math.cos(math.pi / 3)), 0.5 + 0.25 * (1 + math.cos(2 * math.pi / 3)))
    ]
    assert lrs == pytest.approx([0.01, 0.01, 0.00875, 0.00625])
    numbers = size_free(planted(tmp_path), corpus_tokens=256)
    assert numbers["relative_update"] == pytest.approx(0.01 * 4)  # lr x sqrt(16)
    assert numbers["update_budget"] == pytest.approx(0.01 * 8)  # lr x sqrt(16 x 4)
    assert numbers["total_decay"] == pytest.approx(0.2 * 0.035)
    assert numbers["no_gradient_level"] == pytest.approx(1 - math.prod(1 - 0.2 * lr for lr in lrs))
    assert numbers["warmup_fraction"] == 0.25
    assert numbers["tokens_per_step"] == 16 and numbers["lookup_share"] == pytest.approx(1 - (255 / 256) ** 16)
    # one block of 4 d^2 attention and 3 d x 64 MLP weights, and one 256 x 16 matrix: 8,192 parameters
    assert numbers["tokens_per_param"] == pytest.approx(64 / 8192)
    assert numbers["passes"] == pytest.approx(64 / 256)
    assert size_free(planted(tmp_path))["passes"] is None


def test_total_decay_sets_the_weight_decay_the_numbers_read(tmp_path):
    assert size_free(planted(tmp_path, total_decay=0.0035))["total_decay"] == pytest.approx(0.0035)


def test_a_pair_the_pipeline_does_not_train_has_no_size_free_numbers(tmp_path):
    with pytest.raises(PipelineError, match="'other' is not a trained pair"):
        size_free(planted(tmp_path), "other")


def test_the_paper_regime_cell_matches_the_papers_size_free_numbers():
    """configs/paper-regime.yaml at d = 96 against configs/paper-train.yaml (the authors' 10k-step 1B config):
    relative update size, update budget, total decay and its level, warmup fraction to 3 significant figures."""
    paper, cell = (
        size_free(prepared(path).config) for path in ("configs/paper-train.yaml", "configs/paper-regime.yaml")
    )
    assert cell["hidden_size"] == 96 and paper["hidden_size"] == 2048
    for key in ("relative_update", "update_budget", "total_decay", "no_gradient_level", "warmup_fraction"):
        assert cell[key] == pytest.approx(paper[key], rel=1e-3), key
    assert cell["tokens_per_step"] < paper["tokens_per_step"]  # the one number it leaves: configs/large-batch.yaml's


def test_the_methods_pages_regime_table_is_the_packages(tmp_path):
    """Every row of docs/methods.md's size-free table is what tying.plan.size_free computes for its config; the
    passes are the tokens read over the corpus's training tokens shown beside them (a build's count)."""
    text = (ROOT / "docs" / "methods.md").read_text()
    header = "| " + " | ".join(COLUMNS.values()) + " |"
    assert header in text, "docs/methods.md has no size-free table (python -m tying.plan.size_free)"
    lines = text[text.index(header) :].splitlines()
    rows = [
        dict(zip(COLUMNS, (c.strip() for c in line.strip("|").split("|"))))
        for line in lines[2:]
        if line.startswith("|")
    ]
    rows = rows[: next((i for i, r in enumerate(rows) if len(r) < len(COLUMNS)), len(rows))]
    assert len(rows) >= 6
    for shown, row in zip(rows, regime_rows([r["config"] for r in rows], launch_dir=ROOT, builds=tmp_path)):
        corpus = shown["corpus_tokens"]
        if corpus != "not built":
            tokens = int(corpus.replace(",", ""))
            row = {**row, "corpus_tokens": tokens, "passes": row["steps"] * row["tokens_per_step"] / tokens}
        for key in COLUMNS:
            assert shown[key] == formatted(key, row[key]), (shown["config"], key)
    assert re.search(r"python -m tying\.plan\.size_free", text)

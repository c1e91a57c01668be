"""The survey of released models, offline from a fake hub cache with planted structure and negative controls."""

import csv
import os

import pandas as pd
import pytest
import torch
from hubfixtures import build_survey_cache, snapshot_dir
from snakerun import planned_jobs, snakemake

from tying.checkpoints.controls import control_model
from tying.checkpoints.embeddings import load_embeddings
from tying.errors import PipelineError
from tying.plan.layers import load

SURVEY = load("configs/survey.yaml")
UNTIED = {"hub": "test-org/survey-untied"}
FAKE_PAIRS = {
    "planted": {"tied": {"hub": "test-org/survey-tied"}, "untied": UNTIED},
    "cross_tokenizer": {"tied": {"hub": "test-org/survey-tied-other-tokenizer"}, "untied": UNTIED},
    "control_input": {"tied": {"hub": "test-org/survey-sibling"}, "untied": UNTIED, "control": "input"},
    "gated": {"tied": {"hub": "test-org/survey-tied"}, "untied": {"hub": "test-org/gated-untied"}},
}


def fake_survey_config(**changes):
    return {
        **{k: SURVEY[k] for k in ("seeds", "corpus", "tokenizer", "model", "train", "variants", "architectures")},
        "pairs": FAKE_PAIRS,
        "survey": {
            "comparisons": {"planted": "Fake", "cross_tokenizer": "Fake", "control_input": "Fake", "gated": "Gated"},
            "params": {"test-org/survey-untied": 0.12},
            "gated": ["test-org/gated-untied"],
        },
        "analysis": {"knn_k": 10},
        **changes,
    }


def offline_env(cache):
    env = {k: v for k, v in os.environ.items() if k != "HF_TOKEN"}
    return {**env, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(cache), "HF_HOME": str(cache.parent / "hf-home")}


@pytest.fixture(scope="module")
def survey_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("survey")
    build_survey_cache(root / "cache")
    result = snakemake(
        root,
        "results/tables/survey.md",
        "figures/survey.pdf",
        config=fake_survey_config(),
        env=offline_env(root / "cache"),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return root


def test_planted_structure_holds_and_the_input_control_does_not(survey_run):
    table = pd.read_csv(survey_run / "results/tables/survey.csv").set_index("comparison")
    # Config order (the test's config file is written with sorted keys), comparisons not run last.
    assert list(table.index) == ["control_input", "cross_tokenizer", "planted", "gated"]
    assert table.loc["planted", "verdict"] == "holds (one pair of models)"
    assert table.loc["control_input", "verdict"] == "does not hold (one pair of models)"
    assert table.loc["gated", "verdict"] == "not run: gated model and no HF token"
    # Planted: tied = U_out A + noise, so Output(U)->Tied is high held out and Input(U)->Tied near chance.
    assert table.loc["planted", "out_tied"] > 0.8 and abs(table.loc["planted", "in_tied"]) < 0.2
    assert abs(table.loc["planted", "out_tied_chance"]) < 0.2
    assert table.loc["control_input", "in_tied"] > 0.8 and abs(table.loc["control_input", "out_tied"]) < 0.2
    assert table.loc["planted", "knn_tied_output"] > 5 * table.loc["planted", "knn_tied_input"]
    assert table.loc["planted", "knn_chance"] == pytest.approx(10 / 399)
    assert table.loc["planted", ["d_tied", "d_untied", "n_tokens", "n_held_out"]].tolist() == [24, 16, 400, 80]
    assert table.loc["planted", "params_untied"] == 0.12 and pd.isna(table.loc["planted", "params_tied"])
    # The other tokenizer holds 300 of the 400 strings: compared on those, the planted structure is found.
    assert table.loc["cross_tokenizer", "cross_tokenizer"] and table.loc["cross_tokenizer", "n_tokens"] == 300
    assert table.loc["cross_tokenizer", "verdict"] == "holds (one pair of models)"
    md = (survey_run / "results/tables/survey.md").read_text()
    assert "control: input" in md and "300 shared strings" in md and "bootstrap over tokens" in md
    assert (survey_run / "figures/survey.pdf").read_bytes()[:4] == b"%PDF"


def test_the_table_names_each_model_by_the_commit_fetched_and_writes_integers_as_integers(survey_run):
    def commit(repo):  # what "main" points to in the fake cache
        return (survey_run / "cache" / f"models--{repo.replace('/', '--')}" / "refs" / "main").read_text()

    table = pd.read_csv(survey_run / "results/tables/survey.csv").set_index("comparison")
    tied, sibling, untied = (commit(f"test-org/survey-{name}") for name in ("tied", "sibling", "untied"))
    assert table.loc["planted", ["commit_tied", "commit_untied"]].tolist() == [tied, untied]
    assert table.loc["control_input", "commit_tied"] == sibling  # the control's source model
    assert pd.isna(table.loc["gated", "commit_tied"])
    assert table.loc["planted", "tied"] == f"test-org/survey-tied@{tied[:7]}"
    assert table.loc["control_input", "tied"] == f"test-org/survey-sibling@{sibling[:7]} (input matrix)"
    assert table.loc["gated", "untied"] == "test-org/gated-untied@main"
    assert f"| test-org/survey-untied@{untied[:7]} |" in (survey_run / "results/tables/survey.md").read_text()
    with open(survey_run / "results/tables/survey.csv", newline="") as text:  # as written, before pandas reads it
        rows = {row["comparison"]: row for row in csv.DictReader(text)}
    assert [rows["planted"][c] for c in ("d_tied", "d_untied", "n_tokens", "n_held_out", "knn_k")] == [
        "24",
        "16",
        "400",
        "80",
        "10",
    ]
    assert [rows["gated"][c] for c in ("d_tied", "n_tokens", "knn_k")] == ["", "", ""]


def test_survey_fetches_embeddings_only_and_nothing_of_a_gated_comparison(survey_run):
    fetched = sorted(
        str(p.parent.relative_to(survey_run / "results/hub"))
        for p in (survey_run / "results/hub").glob("*/*/*/*/source.json")
    )
    assert fetched == sorted(
        f"embeddings/test-org/survey-{name}/main" for name in ("sibling", "tied", "tied-other-tokenizer", "untied")
    )


def test_configs_survey_dry_run_plans_one_embeddings_fetch_per_model_and_revision(tmp_path):
    env = offline_env(tmp_path / "empty-cache")
    result = snakemake(tmp_path, "-n", "all", config=SURVEY, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    pairs, gated = SURVEY["pairs"], set(SURVEY["survey"]["gated"])
    run = [p for p in SURVEY["survey"]["comparisons"] if not {pairs[p][r]["hub"] for r in ("tied", "untied")} & gated]
    models = {(pairs[p][r]["hub"], pairs[p][r]["revision"]) for p in run for r in ("tied", "untied")}
    controls = {(pairs[p]["tied"]["hub"], pairs[p]["control"]) for p in run if "control" in pairs[p]}
    assert len(run) >= 10 and len(controls) >= 2
    assert planned_jobs(result) == {
        "hub_embeddings": len(models),
        "survey_control": len(controls),
        "alignment": len(run),
        "knn": len(run),
        "survey_table": 1,
        "survey_figure": 1,
        "all": 1,
    }
    assert "results/hub/full" not in result.stdout
    assert not (tmp_path / "results").exists()


def test_a_control_read_by_a_paper_table_is_a_one_line_config_error(tmp_path):
    config = fake_survey_config(tables={"table1": ["control_input"]})
    result = snakemake(tmp_path, "-n", config=config, env=offline_env(tmp_path / "cache"))
    assert result.returncode != 0
    assert (
        "config error: pairs.control_input: a negative control (control: input) is read by the survey only; "
        "list it in survey.comparisons and in no figure or table"
    ) in result.stderr


def test_a_control_model_is_the_chosen_matrix_of_an_untied_model_written_as_tied(tmp_path):
    cache = tmp_path / "cache"
    commits = build_survey_cache(cache)
    untied = snapshot_dir(cache, "test-org/survey-untied", commits["test-org/survey-untied"])
    source = load_embeddings(untied)
    for matrix in ("input", "output"):
        control_model(untied, matrix, tmp_path / matrix)
        written = load_embeddings(tmp_path / matrix)
        assert written.tied and written.tokens == source.tokens
        assert torch.equal(written.input, getattr(source, matrix))
    tied = snapshot_dir(cache, "test-org/survey-tied", commits["test-org/survey-tied"])
    with pytest.raises(PipelineError, match="a control needs an untied model"):
        control_model(tied, "input", tmp_path / "from-tied")
    assert not (tmp_path / "from-tied").exists()


def test_a_survey_of_gated_comparisons_only_without_a_token_stops_with_one_line(tmp_path):
    config = fake_survey_config(pairs={"gated": FAKE_PAIRS["gated"]})
    config["survey"]["comparisons"] = {"gated": "Gated"}
    result = snakemake(tmp_path, "-n", "results/tables/survey.md", config=config, env=offline_env(tmp_path / "cache"))
    assert result.returncode != 0
    assert result.stderr.splitlines()[-1].startswith("config error: every survey comparison reads a gated model")

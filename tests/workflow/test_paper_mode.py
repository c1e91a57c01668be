"""Paper-scale mode through snakemake, offline, from a fake hub cache of tiny released models."""

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hubfixtures import FAKE_PAIRS, PAPER, add_vocab_files_repo, build_hub_cache, fake_paper_config
from snakerun import planned_jobs, snakemake

from tying.checkpoints.embeddings import load_embeddings


@pytest.fixture(scope="module")
def hub_env(tmp_path_factory):
    """Subprocess environment working offline from a fake hub cache, and a local corpus of fake-vocabulary text."""
    root = tmp_path_factory.mktemp("paper-hub")
    build_hub_cache(root / "cache")
    add_vocab_files_repo(root / "cache")
    rng = np.random.default_rng(0)
    docs = [{"text": " ".join(f"t{i}" for i in rng.integers(1, 64, size=120))} for _ in range(24)]
    (root / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "HF_HUB_CACHE": str(root / "cache"),
        "HF_HOME": str(root / "hf-home"),
    }
    return env, root / "corpus.jsonl"


@pytest.fixture(scope="module")
def paper_run(hub_env, tmp_path_factory):
    env, corpus = hub_env
    workdir = tmp_path_factory.mktemp("paper-run")
    result = snakemake(workdir, config=fake_paper_config(corpus), env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    return workdir


def test_paper_config_builds_its_figures_and_tables_from_fetched_models(paper_run):
    for target in (
        "figures/fig1.pdf",
        "figures/fig2.pdf",
        "figures/fig3.pdf",
        "results/tables/table1.csv",
        "results/tables/table5.csv",
        "results/tables/claims.md",
    ):
        assert (paper_run / target).stat().st_size > 0, target
    table1 = pd.read_csv(paper_run / "results/tables/table1.csv")
    assert set(table1["pair"]) == {"main", "family"}
    assert table1["interval"].str.endswith("tokens, one pair of models").all()  # released pairs have no seeds
    assert list(pd.read_csv(paper_run / "results/tables/table5.csv")["pair"].unique()) == ["main", "scale", "family"]
    evolution = pd.read_parquet(paper_run / "results/metrics/evolution/main/seed0.parquet")
    assert sorted(evolution["step"].unique()) == [0, 1000]
    # The fake step0 and step1000 are independent random initialisations: no drift left.
    assert evolution.loc[evolution["step"] == 1000, "drift"].abs().max() < 0.3


def test_fetches_record_the_resolved_commit_and_only_the_lens_downloads_whole_models(paper_run, hub_env):
    env, _ = hub_env
    cache = Path(env["HF_HUB_CACHE"])
    fetched = sorted(
        p.parent.relative_to(paper_run / "results/hub") for p in (paper_run / "results/hub").glob("*/*/*/*/source.json")
    )
    assert [str(p) for p in fetched if p.parts[0] == "full"] == [
        "full/test-org/olmo-tied/main",
        "full/test-org/olmo-untied/main",
    ]
    assert len([p for p in fetched if p.parts[0] == "embeddings"]) == 8
    record = json.loads((paper_run / "results/hub/embeddings/test-org/olmo-untied/step0/source.json").read_text())
    assert record["commit"] == (cache / "models--test-org--olmo-untied/refs/step0").read_text()
    assert record["embeddings_only"] is True


def test_lens_of_a_hub_model_reads_the_corpus_in_its_own_tokenizer(paper_run):
    tokens = paper_run / "results/hub/tokens/test-org/olmo-tied/main"
    meta = json.loads((tokens / "meta.json").read_text())
    documents = pd.read_parquet(paper_run / "results/corpus/shard0.parquet")
    # The fake tokenizer maps word t{i} to id i; each document ends with EOS (id 0).
    expected = [
        i
        for text in documents.loc[documents["split"] == "train", "text"]
        for i in [*(int(word[1:]) for word in text.split()), 0]
    ]
    assert np.fromfile(tokens / "train.bin", dtype=meta["dtype"]).tolist() == expected
    assert meta["eos_id"] == 0 and meta["tokens"]["train"] == len(expected)
    lens = pd.read_parquet(paper_run / "results/metrics/lens/main/tied/seed0.parquet")
    assert sorted(lens["layer"].unique()) == [0, 1, 2]


def test_claims_of_a_paper_run_fill_their_own_paper_scale_column(paper_run):
    claims = pd.read_parquet(paper_run / "results/tables/claims.parquet").set_index("claim")
    assert list(claims.index) == ["C1", "C2", "C3", "C3s0", "C4"]
    # The paper's numbers are in sample: C1's paper-scale value is its in-sample gap, the others their mean.
    assert np.allclose(claims["paper_scale_mean"], claims["in_sample_mean"].fillna(claims["mean"]))
    # One released pair: token bootstraps where per-token values exist, C3 a bootstrap over validation windows.
    assert claims.loc["C1", "interval"].endswith("tokens, one pair of models")
    assert claims.loc["C1", "verdict"].endswith("(one pair of models)")
    assert (
        claims.loc["C3", "interval"].startswith("95% bootstrap over ")
        and "validation windows" in claims.loc["C3", "interval"]
    )
    # C3's certificate trains its 4x reference lens on the hub pair too. These random tiny models' early states
    # sit about 0.001 bits from their output, so C3 has no room for a gap: not testable, whatever the certificate.
    detail, verdict = claims.loc["C3", "detail"], claims.loc["C3", "verdict"]
    assert "4x reference (seed 0, 3 -> 12 steps)" in detail and "along training (2 -> 3 steps)" in detail
    assert verdict == "not testable here" and claims.loc["C3", "testable"].startswith("no: room for a gap: ")
    assert claims.loc["C3s0", "verdict"] == "not testable here"  # C3 at state 0 needs what C3 needs
    assert (claims.drop(index=["C3", "C3s0"])["testable"] == "yes").all()  # released models: no count table to beat
    assert "paper_scale" in (paper_run / "results/tables/claims.md").read_text()
    # The commits the numbers came from, as each fetch recorded them: tied / untied, short.
    commits = [
        json.loads((paper_run / f"results/hub/embeddings/test-org/olmo-{role}/main/source.json").read_text())["commit"][
            :7
        ]
        for role in ("tied", "untied")
    ]
    assert (claims["commits"] == " / ".join(commits)).all()
    assert " / ".join(commits) in (paper_run / "results/tables/claims.md").read_text()


def test_paper_scale_claims_file_fills_the_column_and_flags_differences(paper_run, hub_env, tmp_path):
    env, corpus = hub_env
    # C1's paper value is 0.194 (tolerance 0.02), C2's 0.237: one differs, one does not.
    pd.DataFrame({"claim": ["C1", "C2"], "mean": [0.194 + 0.05, 0.237 + 0.01]}).to_parquet(tmp_path / "claims.parquet")
    config = fake_paper_config(corpus, paper_scale_claims=str(tmp_path / "claims.parquet"))
    result = snakemake(paper_run, "--forcerun", "claims", "results/tables/claims.parquet", config=config, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    claims = pd.read_parquet(paper_run / "results/tables/claims.parquet").set_index("claim")
    assert np.allclose(claims.loc[["C1", "C2"], "paper_scale_mean"], [0.244, 0.247])
    assert claims.loc["C1", "paper_scale_differs"] and not claims.loc["C2", "paper_scale_differs"]
    assert claims.loc[["C3", "C4"], "paper_scale_mean"].isna().all()


def test_unknown_revision_fails_its_fetch_in_one_line_and_builds_nothing_downstream(hub_env, tmp_path):
    env, corpus = hub_env
    config = fake_paper_config(corpus)
    config["pairs"]["main"] = {**FAKE_PAIRS["main"], "evolution": {0: "step0", 5: "step999"}}
    result = snakemake(tmp_path, "figures/fig3.pdf", config=config, env=env)
    line = (
        "cannot fetch test-org/olmo-untied@step999: revision not found in the local hub cache (HF_HUB_OFFLINE is set)"
    )
    assert result.returncode != 0
    assert (tmp_path / "logs/hub/embeddings/test-org/olmo-untied/step999.log").read_text() == f"error: {line}\n"
    assert f"error: {line}" in result.stderr
    assert not (tmp_path / "results/hub/embeddings/test-org/olmo-untied/step999").exists()
    assert not (tmp_path / "results/metrics").exists() and not (tmp_path / "figures").exists()


def test_a_model_without_tokenizer_json_gets_one_built_at_fetch_time(hub_env, tmp_path):
    env, corpus = hub_env
    fetched = tmp_path / "results/hub/embeddings/test-org/gpt-neo-vocab-files/main"
    result = snakemake(tmp_path, str(fetched.relative_to(tmp_path)), config=fake_paper_config(corpus), env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    embeddings = load_embeddings(fetched)  # reads tokenizer.json
    assert embeddings.tied and embeddings.input.shape == (269, 32)
    assert embeddings.tokens[0] == "<|endoftext|>" and {"vocab.json", "merges.txt"} <= {
        p.name for p in fetched.iterdir()
    }


def test_paper_config_dry_run_plans_every_fetch_and_analysis_without_the_hub(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "empty-cache")}
    result = snakemake(tmp_path, "-n", "all", config=PAPER, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    evolution_revisions = sum(len(p.get("evolution", {})) for p in PAPER["pairs"].values())
    assert evolution_revisions == 11 + 6 + 16
    assert planned_jobs(result) == {
        "corpus": 1,
        "hub_embeddings": 6 + evolution_revisions,  # both models of main, family, scale; every evolution revision
        "hub_model": 6,
        "hub_tokens": 6,
        "lens": 6,
        "fig_lens": 3,  # Figures 2, 6, 7: both models of three pairs
        "alignment": 2,
        "table1": 1,
        "fig1": 1,  # main, family
        "knn": 3,
        "table5": 1,
        "evolution": 3,
        "fig_evolution": 3,  # Figures 3, 8, 9
        "claims": 1,
        "claims_figure": 1,
        "lens_convergence": 2,
        "all": 1,  # C3's half-budget check: both models of main
    }
    assert not (tmp_path / "results").exists()

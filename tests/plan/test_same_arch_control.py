"""The same-architecture control (config.yaml's controls; configs/control-olmo.yaml sets the GPT-NeoX ones beside
them): a second untied OLMo run per seed with its own initialisation and the seed's batches, whose matrices take
the tied role against the `main` untied run."""

import pytest
import torch
from conftest import markov_tokens, word_tokenizer
from safetensors.torch import load_file
from snakerun import ROOT, planned_jobs, snakemake

from tying.data.batches import train_batch
from tying.errors import PipelineError
from tying.plan.checks import check
from tying.plan.claims import claims_pairs, matched_null, matched_null_seeds, mixture_pair
from tying.plan.layers import load
from tying.plan.pairs import pair_models, token_set_runs, trained_runs
from tying.plan.run_params import run_params
from tying.plan.run_spec import RunSpec
from tying.train import loop
from tying.train.models import build_model, init_seed, model_config

SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
CONFIG = load("configs/control-olmo.yaml")
check(CONFIG, SCHEMA)  # fills the schema's defaults in place


def test_the_second_untied_run_differs_from_the_first_only_in_its_initialisation_offset():
    first, second = run_params(CONFIG, "olmo", "untied"), run_params(CONFIG, "olmo", "untied_b")
    assert {k for k in first.keys() | second.keys() if first.get(k) != second.get(k)} == {"init_offset"}
    assert second["init_offset"] == 1 and "init_offset" not in first


def test_the_control_pair_plans_the_second_runs_matrix_against_the_main_untied_run_on_the_same_batches():
    for seed in (0, 1, 2):
        models = pair_models(CONFIG, "control_olmo", seed)
        assert models == {
            "tied": f"results/controls/olmo/untied_b/seed{seed}/step1000/input",
            "untied": f"results/checkpoints/olmo/untied/seed{seed}/step1000",
        }
        # one run shape: both runs drew the seed's batches, so the pair's token set is the main pair's
        assert (
            token_set_runs(CONFIG, "control_olmo", seed)
            == token_set_runs(CONFIG, "main", seed)
            == [(seed, 1000, 16, 64)]
        )
    assert pair_models(CONFIG, "control_olmo_output", 2)["tied"].endswith("untied_b/seed2/step1000/output")
    assert mixture_pair(CONFIG, claims_pairs(CONFIG)) == "control_olmo_mixture"
    runs = trained_runs(CONFIG, claims_pairs(CONFIG))
    assert [r for r in runs if r[1] == "untied_b"] == [("olmo", "untied_b", s) for s in (0, 1, 2)]


def test_an_offset_draws_another_start_and_no_offset_keeps_the_runs_fingerprint():
    assert init_seed(3, False, 1) != init_seed(3, False) == init_seed(3, False, 0)
    config = model_config("olmo", vocab_size=50, hidden_size=8, layers=1, heads=2, seq_len=8, tied=False, eos_id=0)
    a, b = (build_model(config, init_seed(3, False, o), "olmo").get_input_embeddings().weight for o in (0, 1))
    assert not torch.equal(a, b)
    fields = {**run_params(CONFIG, "olmo", "untied"), "seed": 3, "vocab_size": 50, "eos_id": 0}
    plain = RunSpec.from_dict(fields)
    assert "init_offset" not in plain.to_dict() and RunSpec.from_dict(plain.to_dict()) == plain
    offset = RunSpec.from_dict({**fields, "init_offset": 1})
    assert offset.to_dict()["init_offset"] == 1 and offset.fingerprint() != plain.fingerprint()


def test_the_default_configs_controls_are_the_second_olmo_run_and_gpt_neox_trains_only_the_family_pair():
    default = load()
    check(default, SCHEMA)
    for name in ("control", "control_output", "control_mixture"):
        assert default["pairs"][name]["tied"] == {"arch": "olmo", "variant": "untied_b"}
    assert mixture_pair(default, claims_pairs(default)) == "control_mixture"
    runs = trained_runs(default, list(default["pairs"]))
    assert [r for r in runs if r[0] == "gpt_neox"] == [("gpt_neox", "tied", 0), ("gpt_neox", "untied", 0)]
    assert [r for r in runs if r[1] == "untied_b"] == [("olmo", "untied_b", s) for s in (0, 1, 2)]


def test_the_claims_pairs_matched_null_is_the_controls_second_untied_run_on_the_seeds_it_has(tmp_path):
    default = load()
    check(default, SCHEMA)
    assert matched_null(default, "main") == {"arch": "olmo", "variant": "untied_b"}
    assert matched_null_seeds(default, "main") == [0, 1, 2]  # main has seeds 0-3, the controls 0-2
    assert matched_null(default, "family") is None  # no control of the GPT-NeoX untied run
    given = {**default, "pairs": {**default["pairs"], "main": {**default["pairs"]["main"], "lens": False}}}
    assert matched_null(given, "main") is None and matched_null_seeds(given, "main") == []
    result = snakemake(tmp_path, "-n", "results/tables/claims.md", config=load())
    assert result.returncode == 0, result.stderr
    for seed in (0, 1, 2):  # the matched null's lens, read by C3's and C3s0's detail
        assert f"results/metrics/lens/main/null/seed{seed}.parquet" in result.stdout
    assert planned_jobs(result)["lens_null"] == 3 and "results/metrics/lens/main/null/seed3" not in result.stdout


def test_a_dry_run_plans_the_second_runs_and_their_matrices(tmp_path):
    config = {k: v for k, v in load("configs/control-olmo.yaml").items() if k != "workdir"}
    result = snakemake(tmp_path, "-n", "results/tables/claims.md", config=config)
    assert result.returncode == 0, result.stderr
    for seed in (0, 1, 2):
        assert f"results/checkpoints/olmo/untied_b/seed{seed}/step1000" in result.stdout
        for matrix in ("input", "output", "mixture"):
            assert f"results/controls/olmo/untied_b/seed{seed}/step1000/{matrix}" in result.stdout
    assert "results/checkpoints/olmo/untied_b/seed3/" not in result.stdout  # the controls' 3 seeds only
    assert "lens_null" not in planned_jobs(result)  # main's lens is left out here


def test_a_data_offset_trains_the_seeds_start_on_another_seeds_batches_and_no_offset_keeps_the_fingerprint(
    tmp_path, monkeypatch
):
    """data_offset, init_offset's mirror (lens_budget's data-order null): the start of seed s, the batches of seed
    s + offset; a run without one keeps its fingerprint, and no pair may name such a variant."""
    fields = {**run_params(CONFIG, "olmo", "untied"), "seed": 3, "vocab_size": 50, "eos_id": 0}
    plain = RunSpec.from_dict(fields)
    assert "data_offset" not in plain.to_dict() and RunSpec.from_dict(plain.to_dict()) == plain
    offset = RunSpec.from_dict({**fields, "data_offset": 1})
    assert offset.to_dict()["data_offset"] == 1 and offset.fingerprint() != plain.fingerprint()
    default = load()
    check(default, SCHEMA)
    first, data = run_params(default, "olmo", "untied"), run_params(default, "olmo", "untied_d")
    assert {k for k in first.keys() | data.keys() if first.get(k) != data.get(k)} == {"data_offset"}
    seen = []

    def spy(ids, step, seed, *rest):
        seen.append(seed)
        return train_batch(ids, step, seed, *rest)

    monkeypatch.setattr(loop, "train_batch", spy)
    ids, tokenizer = markov_tokens(3_000, 64, seed=1), word_tokenizer(64)
    small = dict(
        family="olmo",
        vocab_size=64,
        eos_id=0,
        hidden_size=16,
        layers=1,
        heads=2,
        intermediate_size=32,
        seq_len=16,
        tied=False,
        input_grad_scale=1.0,
        seed=2,
        steps=2,
        batch_size=2,
        lr=1e-2,
        warmup=1,
        min_lr_ratio=0.1,
        weight_decay=0.1,
        grad_clip=1.0,
        checkpoints=(0, 2),
        eval_batches=1,
    )
    for name, extra in (("plain", {}), ("data", {"data_offset": 1})):
        root = tmp_path / name
        loop.train(
            RunSpec(**small, **extra),
            ids[:2_500],
            ids[2_500:],
            tokenizer,
            root / "work",
            checkpoint_dirs={s: root / f"step{s}" for s in (0, 2)},
            log_path=root / "log.parquet",
            provenance_path=root / "provenance.parquet",
            log_every=100,
        )
    assert seen == [2, 2, 3, 3]  # the plain run's batches are seed 2's, the offset run's seed 3's
    start = [load_file(tmp_path / name / "step0" / "model.safetensors") for name in ("plain", "data")]
    assert all(torch.equal(start[0][k], start[1][k]) for k in start[0])  # the same initialisation
    bad = load()
    bad["pairs"]["main"]["untied"] = {"arch": "olmo", "variant": "untied_d"}
    with pytest.raises(PipelineError, match="pairs.main.untied.variant: 'untied_d' trains on another seed's batches"):
        check(bad, SCHEMA)

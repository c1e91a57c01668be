"""tying.plan.pairs on small config dicts: what each pair is, decided from the config alone."""

import copy
from dataclasses import fields

import pytest
import yaml
from snakerun import ROOT

from tying.errors import PipelineError
from tying.plan import claims, claims_over_training, pairs, runs, survey
from tying.plan.checks import check
from tying.plan.config import prepared
from tying.plan.references import reference
from tying.plan.run_params import run_params
from tying.plan.run_spec import RunSpec

SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
MICRO = yaml.safe_load((ROOT / "tests" / "micro.yaml").read_text())
OLMO = {"hub": "allenai/OLMo-1B-hf", "revision": "abc"}
OLMO_U = {"hub": "allenai/OLMo-1B-0724-hf", "revision": "def"}


@pytest.fixture
def config():
    """The micro config, validated, with a hub pair, a trained control and a pair with its own seeds and step."""
    config = copy.deepcopy(MICRO)
    config["seeds"] = [0, 1]
    config["pairs"] |= {
        "hub": {"tied": OLMO, "untied": OLMO_U, "evolution": {"0": "step0", "2000": "step2000"}},
        "ctl": {
            "tied": {"arch": "gpt_neox", "variant": "untied"},
            "untied": {"arch": "olmo", "variant": "untied"},
            "control": "input",
        },
        "own": {
            "tied": {"arch": "olmo", "variant": "tied"},
            "untied": {"arch": "olmo", "variant": "untied"},
            "seeds": [3],
            "step": 3,
        },
    }
    check(config, SCHEMA)
    return config


def test_a_pair_is_trained_or_released_by_its_untied_reference(config):
    assert pairs.trained(config, "main") and pairs.trained(config, "ctl") and not pairs.trained(config, "hub")
    assert pairs.released_pairs(config, ["main", "hub", "ctl"]) == ["hub"]
    assert reference(OLMO).name == "allenai/OLMo-1B-hf@abc" and reference({"hub": "org/m"}).name == "org/m@main"
    assert reference(config["pairs"]["main"]["tied"]).name == "olmo/tied"
    assert reference({"path": "/models/m/", "tokenizer": "/tok"}).label == "m"


def test_seeds_and_the_compared_step(config):
    assert pairs.pair_seeds(config, "main") == [0, 1] and pairs.pair_step(config, "main") == 6
    assert pairs.pair_seeds(config, "own") == [3] and pairs.pair_step(config, "own") == 3
    assert pairs.pair_seeds(config, "hub") == [0] and pairs.pair_step(config, "hub") == 0


def test_the_training_schedule_is_read_in_one_place(config):
    shared = runs.schedule(config)
    assert shared == runs.schedule(config, "olmo") == pairs.pair_schedule(config, "main")
    assert (shared.steps, shared.checkpoints, shared.final) == (6, (0, 3, 6), 6)
    assert pairs.early_steps(config) == max(1, round(config["analysis"]["early_fraction"] * 6))
    assert pairs.scaling_steps(config, "main") == [3, 6]
    params = run_params(config, "olmo", "tied")
    assert (params["steps"], params["checkpoints"]) == (6, [0, 3, 6])


def test_model_directories_of_each_kind_of_pair(config):
    assert pairs.pair_models(config, "main", 1) == {
        "tied": "results/checkpoints/olmo/tied/seed1/step6",
        "untied": "results/checkpoints/olmo/untied/seed1/step6",
    }
    assert pairs.pair_models(config, "hub", 0, full=True) == {
        "tied": "results/hub/full/allenai/OLMo-1B-hf/abc",
        "untied": "results/hub/full/allenai/OLMo-1B-0724-hf/def",
    }
    assert pairs.pair_models(config, "ctl", 0)["tied"] == "results/controls/gpt_neox/untied/seed0/step6/input"
    assert pairs.pair_models(config, "own", 3)["untied"] == "results/checkpoints/olmo/untied/seed3/step3"
    assert pairs.evolution_models(config, "main", 0) == {
        s: f"results/checkpoints/olmo/untied/seed0/step{s}" for s in (0, 3, 6)
    }
    assert pairs.evolution_models(config, "hub", 0) == {
        0: "results/hub/embeddings/allenai/OLMo-1B-0724-hf/step0",
        2000: "results/hub/embeddings/allenai/OLMo-1B-0724-hf/step2000",
    }
    assert list(pairs.initial_models(config, "main", 0).values()) == [
        "results/checkpoints/olmo/tied/seed0/step0",
        "results/checkpoints/olmo/untied/seed0/step0",
    ]
    assert pairs.scaled_models(config, "main", 0, 6) == {
        "tied": "results/checkpoints/olmo/tied/seed0/step6",
        "tied_x5": "results/checkpoints/olmo/tied_x5/seed0/step6",
    }


def test_runs_token_sets_and_lens_tokens(config):
    assert pairs.trained_runs(config, ["main", "hub"]) == [
        (a, v, s) for a, v in (("olmo", "tied"), ("olmo", "tied_x5"), ("olmo", "untied")) for s in (0, 1)
    ]
    assert pairs.trained_runs(config, ["ctl"]) == [
        ("gpt_neox", "untied", 0),
        ("gpt_neox", "untied", 1),
        ("olmo", "untied", 0),
        ("olmo", "untied", 1),
    ]
    assert pairs.has_token_set(config, "main") and not pairs.has_token_set(config, "hub")
    assert pairs.token_set_runs(config, "own", "3") == [(3, 3, 4, 16)]
    assert pairs.quality_runs(config, "main") == [
        ("tied", "olmo", "tied"),
        ("untied", "olmo", "untied"),
        ("tied_x5", "olmo", "tied_x5"),
    ]
    assert pairs.quality_runs(config, "ctl") == [("tied", "gpt_neox", "untied"), ("untied", "olmo", "untied")]
    assert reference(config["pairs"]["main"]["tied"]).tokens_source() is None
    assert reference(OLMO_U).tokens_source() == {"repo": "allenai/OLMo-1B-0724-hf", "revision": "def"}


def test_claims_inputs_of_a_trained_and_a_released_claims_pair(config):
    assert claims.claims_metrics(config) == (list(claims.CLAIMS_METRICS), {})
    assert not claims.claims_at_paper_scale(config) and claims.claims_sources(config) == []
    config["tables"]["claims"] = ["main", "hub"]  # a released further pair has no quality (no tokens drawn)
    assert claims.claims_metrics(config)[1] == {"alignment": ["hub"], "knn": ["hub"], "quality": []}
    config["tables"]["claims"] = ["hub", "main"]
    assert claims.claims_metrics(config) == (
        ["alignment", "knn", "evolution"],
        {"alignment": ["main"], "knn": ["main"], "quality": ["main"]},
    )
    assert claims.claims_at_paper_scale(config)
    assert claims.claims_sources(config) == [
        "results/hub/embeddings/allenai/OLMo-1B-hf/abc",
        "results/hub/embeddings/allenai/OLMo-1B-0724-hf/def",
    ]


def test_trajectory_points_and_models(config):
    points = claims_over_training.trajectory_points(config, "main")
    assert points == [{"step": s, "tokens": s * 4 * 16} for s in (0, 3, 6)]
    assert claims_over_training.trajectory_variants(config, "main") == ["tied", "tied_x5"]
    models = claims_over_training.trajectory_models(config, "main", 0)
    assert len(models["tied"]) == len(models["untied"]) == 3 and len(models["scaled"]) == 6
    config["pairs"]["hub"]["trajectory"] = [
        {"tokens_b": 1, "tied": "a", "untied": "b", "tied_tokens_b": 1, "untied_tokens_b": 2}
    ]
    assert claims_over_training.trajectory_models(config, "hub", 0) == {
        "tied": ["results/hub/embeddings/allenai/OLMo-1B-hf/a"],
        "untied": ["results/hub/embeddings/allenai/OLMo-1B-0724-hf/b"],
    }
    assert claims_over_training.trajectory_variants(config, "hub") == []


def test_an_empty_trajectory_of_a_released_pair_is_one_line(config):
    config["tables"]["claims_over_training"] = ["main", "hub"]
    assert claims_over_training.unwritten_trajectories(config) == ["hub"]
    with pytest.raises(PipelineError) as error:
        check(config, SCHEMA)
    assert str(error.value) == (
        "pairs.hub.trajectory is empty: write it with python -m tying.hub.revisions match "
        "(docs/statistics.md, Claims over training)"
    )


def test_figure5_on_a_released_pair_is_refused_by_the_config_check(config):
    """Figure 5 reads a token set (its norm_freq job's `tokens` input), which only a trained pair has."""
    config["figures"]["fig5"] = "hub"
    with pytest.raises(PipelineError) as error:
        check(config, SCHEMA)
    assert str(error.value) == (
        "figures.fig5: pair 'hub' is released models, and fig5 reads what only a pair the "
        "pipeline trains has (training logs, gradient provenance, token counts)"
    )


def test_run_params_are_runspecs_fields_but_seed_and_vocabulary(config):
    """run_params lists the config's share of a RunSpec; the rest (seed, vocab_size, eos_id) the train job adds;
    init_offset and data_offset only where a variant sets one (tests/plan/test_same_arch_control.py)."""
    spec_fields = {f.name for f in fields(RunSpec)}
    assert set(run_params(config, "olmo", "tied")) == spec_fields - {
        "seed",
        "vocab_size",
        "eos_id",
        "init_offset",
        "data_offset",
    }


def test_the_survey_splits_gated_comparisons_without_a_token(config):
    config["pairs"]["gated"] = {"tied": {"hub": "meta/llama"}, "untied": OLMO_U}
    config["survey"] = {
        "comparisons": {"hub": "OLMo", "gated": "Llama"},
        "gated": ["meta/llama"],
        "params": {"allenai/OLMo-1B-hf": 1.2},
    }
    assert survey.survey_pairs(config, has_token=False) == (["hub"], ["gated"])
    assert survey.survey_pairs(config, has_token=True) == (["hub", "gated"], [])
    row = survey.survey_comparison(config, "hub")
    assert (row["tied"], row["family"], row["params_tied"]) == ("allenai/OLMo-1B-hf@abc", "OLMo", 1.2)


def test_drawn_counts_are_kept_at_the_checkpoints_of_the_pairs_compared_at_that_step(config):
    grid = prepared("configs/scaling.yaml").config
    steps = {pairs.pair_step(grid, p) for p in grid["pairs"]}
    assert steps == set(grid["scaling"]["steps"])
    # a 300-step cell's counts are kept at its own checkpoints, not at the 1500-step cells' (750 is not one of
    # them), so the cell run alone asks for the same counts
    assert pairs.drawn_steps(grid, 300) == [0, 300]
    alone = {**grid, "pairs": {"d48_l2_s300": grid["pairs"]["d48_l2_s300"]}}
    assert pairs.drawn_steps(alone, 300) == pairs.drawn_steps(grid, 300)
    assert pairs.drawn_steps(grid, 1500) == sorted(
        {0, 1500, *grid["architectures"]["d96_l3_s1500"]["train"]["checkpoints"]}
    )


def test_a_claims_jobs_grouped_inputs_come_back_as_the_groups_they_were():
    grouped = {
        "first": {"alignment": ["a0", "a1"], "lens_null": []},
        "further": {"knn": ["k0"]},
        "sources": ["tied", "untied"],
        "paper_scale": "claims.parquet",
    }
    flat = claims.flat_inputs(grouped)
    assert list(flat) == ["first__alignment", "first__lens_null", "further__knn", "sources", "paper_scale"]
    assert claims.nested_inputs(flat.items()) == grouped

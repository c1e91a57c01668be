"""C7 as a dose-response (configs/dose.yaml, tying.claims.c7_dose): the dose grid's runs, and the per-dose table."""

import math

import numpy as np
import pandas as pd
import pytest
from snakerun import ROOT, snakemake

from tying.claims.c7_dose import at_margin, dose_seed_values, dose_table, supports
from tying.errors import PipelineError
from tying.plan.checks import check
from tying.plan.config import prepared
from tying.plan.layers import load
from tying.plan.pairs import scaled_variants, token_set_runs, trained_runs
from tying.plan.run_params import run_params
from tying.report.figures.c7_dose import plot_c7_dose

SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
SEEDS = (0, 1, 2)


def _dose_config():
    return prepared("configs/dose.yaml").config


def test_the_dose_grids_runs_differ_only_in_input_grad_scale():
    config = _dose_config()
    variants = scaled_variants(config, "main")
    doses = {v: run_params(config, "olmo", v)["input_grad_scale"] for v in variants}
    assert len(set(doses.values())) == len(doses) > 2 and doses["tied"] == 1.0  # a dose a run, the tied run's 1
    tied = run_params(config, "olmo", "tied")
    for variant in variants:
        params = run_params(config, "olmo", variant)
        assert {k for k in tied if params[k] != tied[k]} == ({"input_grad_scale"} if variant != "tied" else set())
        assert params.keys() == tied.keys()
    # every dose of a seed trains on the seed's batches (one run shape) from the tied variants' shared start
    train = config["train"]
    assert token_set_runs(config, "main", 1) == [(1, train["steps"], train["batch_size"], config["model"]["seq_len"])]
    runs = trained_runs(config, ["main"])
    assert sorted(runs) == sorted(("olmo", v, s) for v in [*variants, "untied"] for s in config["seeds"])


def test_a_dose_table_needs_a_pair_with_scaled_variants():
    config = _dose_config()
    config["pairs"]["main"]["scaled"] = []
    with pytest.raises(PipelineError, match="tables.c7_dose: pair 'main' has no input-scaled variants"):
        check(config, SCHEMA)


DOSES = {"tied": 1.0, "tied_x2": 2.0, "tied_x5": 5.0}


def _planted(toward_input, away_from_output):
    """Metric frames where dose d moves the tied matrix by toward_input(d) toward Input(U) and away_from_output(d)
    from Output(U) (plus a seed offset that cancels), its input path carries d / (d + 3) of the gradient, and its
    margin is -0.5 - 0.01 d (plus a seed offset of +-0.01)."""
    scaling, quality, provenance = [], [], {}
    for seed in SEEDS:
        for variant, dose in DOSES.items():
            shift = {
                "input_u": toward_input(dose) - toward_input(1),
                "output_u": -(away_from_output(dose) - away_from_output(1)),
            }
            for reference, moved in shift.items():
                for target, base in (("true", 0.4), ("permuted", 0.1)):
                    scaling.append(
                        {
                            "pair": "main",
                            "seed": seed,
                            "step": 1000,
                            "variant": variant,
                            "reference": reference,
                            "scored": "held_out",
                            "target": target,
                            "cosine": base + 0.05 * seed + (moved if target == "true" else 0.0),
                        }
                    )
            steps = np.arange(1, 11)
            provenance[(variant, seed)] = pd.DataFrame(
                {"step": steps, "g_in": dose * np.ones(10), "g_out": 3 * np.ones(10)}
            )
            quality += [
                {
                    "seed": seed,
                    "role": variant,
                    "variant": variant,
                    "step": s,
                    "margin": (-0.5 - 0.01 * dose + 0.01 * (seed - 1)) * (1 if s == 1000 else 0),
                }
                for s in (500, 1000)
            ]
    return pd.DataFrame(scaling), pd.DataFrame(quality), provenance


def test_each_dose_gets_its_planted_move_gradient_share_and_margin(tmp_path):
    scaling, quality, provenance = _planted(lambda d: 0.002 * d, lambda d: 0.02 * d)
    table = dose_table(dose_seed_values(scaling, quality, provenance, DOSES)).set_index("variant")
    assert table["dose"].tolist() == [1.0, 2.0, 5.0] and (table["seeds"] == 3).all()
    assert table.loc["tied", "C7a"] == "0 (reference)" and math.isnan(table.loc["tied", "C7a_low"])
    assert table.loc["tied_x5", "C7a_mean"] == pytest.approx(0.008)
    assert table.loc["tied_x2", "C7a_mean"] == pytest.approx(0.002)
    assert table.loc["tied_x5", "C7b_mean"] == pytest.approx(-0.08)
    assert table.loc["tied_x5", "C7a_chance_mean"] == pytest.approx(0.0)
    assert table.loc["tied_x5", "C7a_low"] == pytest.approx(0.008)  # no spread over seeds: a zero-width interval
    for variant, dose in DOSES.items():
        assert table.loc[variant, "in_share_mean"] == pytest.approx(dose / (dose + 3))
        assert table.loc[variant, "margin_mean"] == pytest.approx(-0.5 - 0.01 * dose)
        assert table.loc[variant, "margin_low"] < table.loc[variant, "margin_mean"] < table.loc[variant, "margin_high"]
    assert supports(table.reset_index()) == "more input-shaped"
    plot_c7_dose(table.reset_index(), tmp_path / "c7_dose.pdf")
    assert (tmp_path / "c7_dose.pdf").read_bytes().startswith(b"%PDF")


def test_a_matrix_that_only_loses_its_output_fit_reads_less_output_fitted():
    scaling, quality, provenance = _planted(lambda d: 0.0, lambda d: 0.02 * d)
    table = dose_table(dose_seed_values(scaling, quality, provenance, DOSES))
    top = table.set_index("variant").loc["tied_x5"]
    assert top["C7a_mean"] == pytest.approx(0.0) and top["C7b_mean"] == pytest.approx(-0.08)
    assert supports(table) == "less output-fitted"


def test_a_dry_run_plans_the_dose_table_from_every_doses_runs(tmp_path):
    config = {k: v for k, v in load("configs/dose.yaml").items() if k != "workdir"}
    result = snakemake(tmp_path, "-n", "figures/c7_dose.pdf", config=config)
    assert result.returncode == 0, result.stderr
    for variant in scaled_variants(_dose_config(), "main"):
        for seed in config["seeds"]:
            assert f"results/train/olmo/{variant}/seed{seed}/provenance.parquet" in result.stdout
    assert "rule lens:" not in result.stdout


def _reference(ceiling_in, ceiling_out, tied_by_step):
    """A c7_dose_reference frame: the ceilings, and the tied run's held-out cosines to Input(U) and Output(U) at
    each step ({step: (input, output)} plus 0.05 x seed, as _planted's scaling has them)."""
    rows = []
    for seed in SEEDS:
        for target, scale in (("true", 1.0), ("permuted", 0.0)):
            rows += [
                {
                    "pair": "main",
                    "seed": seed,
                    "kind": "ceiling",
                    "step": 1000,
                    "reference": ref,
                    "scored": "held_out",
                    "target": target,
                    "cosine": scale * value,
                }
                for ref, value in (("input_u", ceiling_in), ("output_u", ceiling_out))
            ]
            rows += [
                {
                    "pair": "main",
                    "seed": seed,
                    "kind": "tied",
                    "step": step,
                    "reference": ref,
                    "scored": "held_out",
                    "target": target,
                    "cosine": scale * (value + 0.05 * seed),
                }
                for step, pair in tied_by_step.items()
                for ref, value in zip(("input_u", "output_u"), pair)
            ]
    return pd.DataFrame(rows)


def test_c7s_normalised_parts_are_its_moves_over_their_ceilings():
    """C7a over the cosine a second untied run's input matrix reaches to Input(U) (0.5), C7b over its output
    matrix's to Output(U) (0.8): x5 moves 0.008 toward Input(U) and 0.08 away from Output(U), 0.016 and -0.1."""
    scaling, quality, provenance = _planted(lambda d: 0.002 * d, lambda d: 0.02 * d)
    reference = _reference(0.5, 0.8, {500: (0.2, 0.2), 1000: (0.4, 0.4)})
    table = dose_table(dose_seed_values(scaling, quality, provenance, DOSES, reference=reference)).set_index("variant")
    assert table.loc["tied_x5", "C7a_norm_mean"] == pytest.approx(0.016)
    assert table.loc["tied_x5", "C7b_norm_mean"] == pytest.approx(-0.1)
    assert table.loc["tied_x2", "C7a_norm_mean"] == pytest.approx(0.004)
    assert table.loc["tied", "C7a_norm"] == "0 (reference)"


def test_a_dose_is_compared_with_the_tied_run_at_its_own_margin(tmp_path):
    """The tied run's margins -0.2 at step 500 and -0.6 at 1000: x2 ending at -0.5 matches the tied run three
    quarters of the way, step 875, where its cosines are 0.35 (+ 0.05 x seed) to both references; x2's own are
    0.402 and 0.38. x5, better than the tied run ever got, has no match."""
    scaling, _, provenance = _planted(lambda d: 0.002 * d, lambda d: 0.02 * d)
    final = {"tied": -0.6, "tied_x2": -0.5, "tied_x5": -0.7}
    quality = pd.DataFrame(
        [
            {"seed": seed, "role": v, "variant": v, "step": step, "margin": margin}
            for seed in SEEDS
            for v, m in final.items()
            for step, margin in ((500, -0.2 if v == "tied" else 0.0), (1000, m))
        ]
    )
    reference = _reference(0.5, 0.8, {500: (0.2, 0.2), 1000: (0.4, 0.4)})
    table = dose_table(dose_seed_values(scaling, quality, provenance, DOSES, reference=reference)).set_index("variant")
    assert table.loc["tied_x2", "equal_step_mean"] == pytest.approx(875)
    assert table.loc["tied_x2", "C7a_equal_mean"] == pytest.approx(0.052)
    assert table.loc["tied_x2", "C7b_equal_mean"] == pytest.approx(0.03)
    assert math.isnan(table.loc["tied_x5", "C7a_equal_mean"]) and math.isnan(table.loc["tied_x5", "equal_step_mean"])
    assert table.loc["tied", "equal_step_mean"] == 1000
    assert supports(table.reset_index(), "_equal") == "not measured"
    plot_c7_dose(table.reset_index(), tmp_path / "c7_dose.pdf")  # with the ceilings' and equal margin's panels
    assert (tmp_path / "c7_dose.pdf").read_bytes().startswith(b"%PDF")


def test_at_margin_interpolates_on_the_latest_bracketing_segment():
    margins = pd.Series([0.0, 0.4, -0.2, -0.6], index=[0, 50, 500, 1000])  # worse than the table early on
    step, weights = at_margin(margins, -0.3)
    assert step == pytest.approx(625) and weights.tolist() == pytest.approx([0, 0, 0.75, 0.25])
    assert at_margin(margins, 0.2)[0] == pytest.approx(50 + 450 * (0.2 / 0.6))  # not the 0 -> 50 rise
    assert math.isnan(at_margin(margins, -0.7)[0])

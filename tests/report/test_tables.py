"""Seed statistics and the paper tables built from small constructed metric frames."""

import math

import numpy as np
import pandas as pd
import pytest
import torch

from tying import frames
from tying.checkpoints.embeddings import Embeddings
from tying.errors import PipelineError
from tying.metrics.alignment import alignment_frame
from tying.metrics.model_quality import loss_frame
from tying.report import tables
from tying.stats import format_cell, mean_ci, summarise, token_bootstrap_ci


def test_three_seeds_give_the_student_t_interval_not_min_max():
    # The old failure: a percentile bootstrap over three values was exactly [min, max].
    mean, low, high = mean_ci([0.1, 0.2, 0.3])
    half = 4.302652729911275 * 0.1 / math.sqrt(3)  # t(0.975, df=2) * s / sqrt(n)
    assert mean == pytest.approx(0.2)
    assert (low, high) == pytest.approx((0.2 - half, 0.2 + half))
    assert low < 0.1 and high > 0.3  # wider than the range of three seeds
    assert format_cell(mean, low, high) == f"0.200 [{0.2 - half:.3f}, {0.2 + half:.3f}]"


def test_two_seeds_use_twelve_point_seven_and_five_seeds_two_point_seven_eight():
    _, low, high = mean_ci([0.5, 0.7])
    assert (high - low) / 2 == pytest.approx(12.706204736174698 * math.sqrt(0.02) / math.sqrt(2))
    values = [0.1, 0.3, 0.2, 0.4, 0.5]
    _, low, high = mean_ci(values)
    assert (high - low) / 2 == pytest.approx(2.7764451051977987 * np.std(values, ddof=1) / math.sqrt(5))


def test_t_interval_covers_the_mean_at_its_nominal_rate():
    rng = np.random.default_rng(1)
    draws = rng.normal(0.0, 1.0, size=(4000, 3))
    covered = [low <= 0.0 <= high for _, low, high in map(mean_ci, draws)]
    assert np.mean(covered) == pytest.approx(0.95, abs=0.015)


def test_one_seed_gives_the_value_and_no_interval():
    mean, low, high = mean_ci([0.42, math.nan])
    assert mean == 0.42 and math.isnan(low) and math.isnan(high)
    assert format_cell(mean, low, high) == "0.420"
    assert format_cell(*mean_ci([])) == "n/a"


def test_token_bootstrap_is_deterministic_and_about_two_standard_errors_wide():
    values = np.random.default_rng(0).normal(0.3, 1.0, size=2000)
    mean, low, high = token_bootstrap_ci(values)
    assert token_bootstrap_ci(values) == (mean, low, high)
    assert mean == pytest.approx(values.mean())
    assert (high - low) / 2 == pytest.approx(1.96 * values.std() / math.sqrt(2000), rel=0.1)


def test_summarise_rejects_two_values_for_one_seed():
    frame = pd.DataFrame({"g": ["a", "a"], "seed": [0, 0], "v": [1.0, 2.0]})
    with pytest.raises(PipelineError):
        summarise(frame, ["g"], "v")


FIT_OFFSET = {
    ("in_sample", "true"): 0.0,
    ("in_sample", "permuted"): -0.2,
    ("held_out", "true"): -0.1,
    ("held_out", "permuted"): -0.3,
}


def _alignment():
    """Two seeds; per-seed mean cosine = base + 0.1 * seed + the fit's offset, last step 20 (step 10 a decoy)."""
    rows = []
    for step in (10, 20):
        for seed in (0, 1):
            for c, comparison in enumerate(tables.ALIGNMENT_COMPARISONS):
                for m, map_ in enumerate(("identity", "orthogonal", "linear", "identity_uncentred")):
                    for (scored, target), shift in FIT_OFFSET.items():
                        base = 0.1 * c + 0.01 * m + 0.1 * seed + (0 if step == 20 else 5) + shift
                        for token, offset in enumerate((-0.05, 0.05)):
                            rows.append(
                                ("main", seed, step, comparison, map_, scored, target, token, base + offset, 100, False)
                            )
    return pd.DataFrame(
        rows,
        columns=[
            "pair",
            "seed",
            "step",
            "comparison",
            "map",
            "scored",
            "target",
            "token_id",
            "cosine",
            "n_tokens",
            "cross_tokenizer",
        ],
    )


HALF_TWO_SEEDS = 12.706204736174698 * 0.05  # t(0.975, 1) * s / sqrt(2), s = 0.1 / sqrt(2)


def test_table1_cells_chance_held_out_and_paper_numbers():
    table = tables.table1(_alignment()).set_index(["comparison", "map"])
    # Input(U) -> Tied is comparison 2; linear map 2: seeds 0.22 and 0.32 in sample.
    row = table.loc["Input(U) -> Tied", "linear"]
    assert row["in-sample"] == f"0.270 [{0.27 - HALF_TWO_SEEDS:.3f}, {0.27 + HALF_TWO_SEEDS:.3f}]"
    assert row["in_sample_mean"] == pytest.approx(0.27)
    assert row["held_out_mean"] == pytest.approx(0.17)
    assert row["in_sample_chance_mean"] == pytest.approx(0.07)
    assert row["held_out_chance_mean"] == pytest.approx(-0.03)
    assert row["in-sample (paper)"] == "0.525"
    assert row["tokens"] == "100"
    assert table.loc[("Output(U) -> Tied", "orthogonal"), "in-sample (paper)"] == "0.669"
    # The paper's identity column is its authors' raw cosine: it sits beside the uncentred identity only.
    uncentred, centred = "identity, uncentred (paper's convention)", "identity, centred"
    assert table.loc[("Output(U) -> Tied", uncentred), "in-sample (paper)"] == "0.014"
    assert table.loc[("Output(U) -> Tied", centred), "in-sample (paper)"] == ""
    assert table.loc[("Output(U) -> Tied", centred), "in_sample_mean"] == pytest.approx(0.15)
    assert list(table.loc["Output(U) -> Tied"].index) == [uncentred, centred, "orthogonal", "linear"]
    assert list(table.index.get_level_values(0).unique()) == list(tables.ALIGNMENT_COMPARISONS.values())
    assert (table["n_seeds"] == 2).all()


def test_table1_at_a_chosen_step():
    table = tables.table1(_alignment(), step=10).set_index(["comparison", "map"])
    assert table.loc[("Input(U) -> Tied", "linear"), "in_sample_mean"] == pytest.approx(5.27)


def test_released_pairs_get_a_token_bootstrap_labelled_as_one_pair_of_models():
    frame = _alignment()
    released = frame[frame["seed"] == 0].assign(pair="olmo")
    table = tables.table1(pd.concat([frame, released]), released=["olmo"]).set_index(["pair", "comparison", "map"])
    row = table.loc[("olmo", "Input(U) -> Tied", "linear")]
    assert row["interval"] == "bootstrap 95% over 2 tokens, one pair of models"
    # Two tokens at 0.22 -/+ 0.05: resampled means are 0.17, 0.22 or 0.27.
    assert (row["in_sample_ci_low"], row["in_sample_mean"], row["in_sample_ci_high"]) == pytest.approx(
        (0.17, 0.22, 0.27)
    )
    assert table.loc[("main", "Input(U) -> Tied", "linear"), "interval"] == "Student-t 95%, 2 seeds"
    assert list(table.index.get_level_values(0).unique()) == ["main", "olmo"]


def test_table1_names_shared_strings_of_two_tokenizers():
    frame = _alignment().assign(cross_tokenizer=True, n_tokens=36938)
    assert (tables.table1(frame)["tokens"] == "36,938 shared strings").all()


def test_table1_of_members_of_different_widths_says_which_maps_are_undefined_and_why():
    """An untied model 8 wide against a tied one 12 wide: Input(U) -> Output(U) has every map; the comparisons with
    Tied have the linear map alone, and their identity and orthogonal rows say they are undefined, not missing."""
    generator = torch.Generator().manual_seed(0)
    tokens = tuple(f"t{i}" for i in range(40))
    untied = Embeddings(torch.randn(40, 8, generator=generator), torch.randn(40, 8, generator=generator), False, tokens)
    wide = torch.randn(40, 12, generator=generator)
    frame = alignment_frame(untied, Embeddings(wide, wide, True, tokens)).assign(pair="mine", seed=0, step=0)
    table = tables.table1(frame, released=["mine"]).set_index(["comparison", "map"])
    assert len(table) == 12 and (table["tokens"] == "40").all()
    across = [(c, m) for c in ("Output(U) -> Tied", "Input(U) -> Tied") for m in tables.MAPS.values() if m != "linear"]
    for key in across:
        assert (table.loc[key, list(tables.FITS.values())] == "undefined (widths differ)").all()
        assert table.loc[key, "interval"] == "none: identity and orthogonal maps need equal widths"
        assert math.isnan(table.loc[key, "in_sample_mean"])
    defined = table.drop(index=across)
    assert len(defined) == 6 and defined["in_sample_mean"].notna().all()
    assert not defined[list(tables.FITS.values())].isin(["undefined (widths differ)"]).any().any()


def test_markdown_shows_header_rows_and_hides_numbers(tmp_path):
    table = tables.table1(_alignment())
    frames.write_table(table, tmp_path / "t1.csv", tmp_path / "t1.md")
    lines = (tmp_path / "t1.md").read_text().splitlines()
    assert lines[0] == (
        "| pair | comparison | map | in-sample | in-sample (paper) | chance (in-sample, rows permuted) | held-out"
        " | chance (held-out, rows permuted) | tokens | interval | n_seeds |"
    )
    assert lines[1] == "|" + "---|" * 11
    assert lines[-1].startswith("| main | Input(U) -> Tied | linear | 0.270 [")
    assert lines[-1].endswith(
        "| 0.525 | 0.070 ["
        + f"{0.07 - HALF_TWO_SEEDS:.3f}, {0.07 + HALF_TWO_SEEDS:.3f}] | "
        + f"0.170 [{0.17 - HALF_TWO_SEEDS:.3f}, {0.17 + HALF_TWO_SEEDS:.3f}] | "
        + f"-0.030 [{-0.03 - HALF_TWO_SEEDS:.3f}, {-0.03 + HALF_TWO_SEEDS:.3f}] | 100 | Student-t 95%, 2 seeds | 2 |"
    )
    assert len(lines) == 2 + 12
    csv = pd.read_csv(tmp_path / "t1.csv")
    assert csv["in_sample_ci_high"].iloc[-1] == pytest.approx(0.27 + HALF_TWO_SEEDS)


def test_markdown_escapes_pipes_and_blanks_nan():
    frame = pd.DataFrame({"a": ["x|y"], "b": [math.nan], "c": [1.23456]})
    assert frames.markdown(frame).splitlines()[2] == "| x\\|y |  | 1.235 |"


def test_table5_knn_per_pair_and_k_with_null_and_chance():
    rows = [
        (pair, seed, 7, comparison, k, token, 0.1 * i + 0.01 * k + 0.02 * seed + offset, 0.05, k / 99, 100)
        for pair in ("main", "family")
        for seed in (0, 1, 2)
        for i, comparison in enumerate(tables.KNN_COMPARISONS)
        for k in (5, 10)
        for token, offset in enumerate((-0.01, 0.01))
    ]
    knn = pd.DataFrame(
        rows,
        columns=[
            "pair",
            "seed",
            "step",
            "comparison",
            "k",
            "token_id",
            "overlap",
            "null_overlap",
            "chance",
            "n_tokens",
        ],
    )
    table = tables.table5(knn).set_index(["pair", "k", "comparison"])
    assert table.loc[("family", 10, "Tied vs Output(U)"), "overlap_mean"] == pytest.approx(0.22)
    assert table.loc[("family", 10, "Tied vs Output(U)"), "overlap (paper)"] == "0.408"
    assert table.loc[("main", 5, "Tied vs Output(U)"), "overlap (paper)"] == ""
    assert table.loc[("main", 10, "Input(U) vs Output(U)"), "overlap"].startswith("0.320 [")
    assert table.loc[("main", 10, "Input(U) vs Output(U)"), "chance k/(n-1)"] == "0.101 [0.101, 0.101]"
    assert table.loc[("main", 10, "Input(U) vs Output(U)"), "null (rows permuted)"].startswith("0.050")


def _scaling():
    cos = {
        ("tied", "input_u"): 0.20,
        ("tied", "output_u"): 0.40,
        ("tied_x5", "input_u"): 0.22,
        ("tied_x5", "output_u"): 0.37,
    }
    rows = [
        ("main", seed, step, variant, reference, scored, target, value + step / 1000 + shift, 50)
        for seed in (0,)
        for step in (100, 300)
        for (variant, reference), value in cos.items()
        for (scored, target), shift in FIT_OFFSET.items()
    ]
    return pd.DataFrame(
        rows, columns=["pair", "seed", "step", "variant", "reference", "scored", "target", "cosine", "n_tokens"]
    )


def test_table2_final_step_and_table6_early_step():
    final = tables.table2(_scaling()).set_index(["variant", "reference"])
    assert final.loc[("tied_x5", "vs Input(U)"), "in-sample"] == "0.520"  # one seed: the value alone
    assert final.loc[("tied_x5", "vs Input(U)"), "held-out"] == "0.420"
    assert final.loc[("tied_x5", "vs Output(U)"), "in-sample (paper)"] == "0.369"
    assert (final["step"] == 300).all() and (final["tokens"] == "50").all()
    early = tables.table6(_scaling(), 100).set_index(["variant", "reference"])
    assert early.loc[("tied", "vs Output(U)"), "in-sample"] == "0.500"
    assert early.loc[("tied", "vs Output(U)"), "in-sample (paper)"] == "0.197"
    assert early.loc[("tied_x5", "vs Output(U)"), "in-sample (paper)"] == ""  # the paper's Table 6 has no x5 row
    with pytest.raises(PipelineError):
        tables.table6(_scaling(), 50)


def test_table7_loss_and_perplexity_at_last_step_beside_the_count_tables(tmp_path):
    runs, logs, baselines = [], [], []
    for variant in ("tied", "tied_x5"):
        for seed in (0, 1):
            log, baseline = tmp_path / f"{variant}{seed}.parquet", tmp_path / f"baseline{seed}.parquet"
            pd.DataFrame(
                {
                    "step": [0, 150, 300],
                    "val_loss": [9.0, np.nan, 3.0 + 0.2 * seed + (variant == "tied_x5")],
                    "loss": 1.0,
                }
            ).to_parquet(log)
            pd.DataFrame(
                {"step": [300], "unigram_loss": [6.0], "bigram_loss": [4.0 + 0.1 * seed], "bigram_weight": [0.8]}
            ).to_parquet(baseline)  # the count tables at the compared step only
            runs.append(("olmo", variant, seed))
            logs.append(log)
            baselines.append(baseline)
    loss = loss_frame(runs, logs, baselines)
    assert len(loss) == 8 and loss.loc[loss["step"] == 0, "bigram_loss"].isna().all()  # no step-0 baseline asked
    table = tables.table7(loss).set_index("variant")
    assert table.loc["tied", "val loss"] == f"3.100 [{3.1 - 2 * HALF_TWO_SEEDS:.3f}, {3.1 + 2 * HALF_TWO_SEEDS:.3f}]"
    assert table.loc["tied", "bigram table"] == f"4.050 [{4.05 - HALF_TWO_SEEDS:.3f}, {4.05 + HALF_TWO_SEEDS:.3f}]"
    assert table.loc["tied", "margin_mean"] == pytest.approx(-0.95)
    assert table.loc["tied_x5", "margin_mean"] == pytest.approx(0.05)
    assert table.loc["tied", "unigram_loss_mean"] == pytest.approx(6.0)
    assert table.loc["tied", "perplexity_mean"] == pytest.approx((np.exp(3.0) + np.exp(3.2)) / 2)
    assert table.loc["tied_x5", "perplexity (paper)"] == "36.64 (WikiText-2)"
    assert list(table.columns[1:7]) == [
        "val loss",
        "bigram table",
        "val loss - bigram",
        "unigram table",
        "perplexity",
        "perplexity (paper)",
    ]


def test_only_and_pick_name_what_is_missing():
    frame = pd.DataFrame({"pair": ["main", "main"], "seed": [0, 1]})
    assert len(frames.only(frame, pair="main")) == 2
    with pytest.raises(PipelineError, match=r"^no metric rows with \{'pair': 'x'\}; present: pair=\['main'\]$"):
        frames.only(frame, pair="x")
    wide = pd.Series({"a": 1.0})
    assert frames.pick(wide, "a") == 1.0
    with pytest.raises(PipelineError, match=r"^knn metric has no 'b'; present: \['a'\]$"):
        frames.pick(wide, "b", "knn")


def test_a_table_rule_without_a_builder_is_one_line():
    assert tables.build("table1", _alignment()).equals(tables.table1(_alignment()))
    with pytest.raises(
        PipelineError, match=r"^no table is registered for rule 'table9' \(tying.report.tables.TABLES: table1, "
    ):
        tables.build("table9", _alignment())

"""Seed statistics and the paper tables built from small constructed metric frames."""
import math

import numpy as np
import pandas as pd
import pytest

from tying import tables
from tying.errors import PipelineError
from tying.stats import format_cell, mean_ci, summarise


def test_two_seeds_ci_spans_their_values():
    # Bootstrap means of [a, b] are a, (a+b)/2 or b with probability 1/4, 1/2, 1/4.
    mean, low, high = mean_ci([0.5, 0.7])
    assert mean == pytest.approx(0.6)
    assert (low, high) == pytest.approx((0.5, 0.7))
    assert format_cell(mean, low, high) == "0.600 ± 0.100"


def test_ci_contains_mean_and_shrinks_with_more_seeds():
    # Same spread (sd 0.1), 4 vs 40 seeds: the width falls about as 1/sqrt(n).
    few, many = np.tile([0.2, 0.4], 2), np.tile([0.2, 0.4], 20)
    widths = []
    for values in (few, many):
        mean, low, high = mean_ci(values)
        assert low <= mean <= high
        widths.append(high - low)
    assert widths[1] < widths[0] / 2


def test_one_seed_gives_the_value_and_no_interval():
    mean, low, high = mean_ci([0.42, math.nan])
    assert mean == 0.42 and math.isnan(low) and math.isnan(high)
    assert format_cell(mean, low, high) == "0.420"
    assert format_cell(*mean_ci([])) == "n/a"


def test_bootstrap_is_deterministic():
    values = [0.1, 0.4, 0.35, 0.2]
    assert mean_ci(values) == mean_ci(values)


def test_summarise_rejects_two_values_for_one_seed():
    frame = pd.DataFrame({"g": ["a", "a"], "seed": [0, 0], "v": [1.0, 2.0]})
    with pytest.raises(PipelineError):
        summarise(frame, ["g"], "v")


def _alignment():
    """Two seeds; per-seed mean cosine = base + 0.1 * seed, last step 20 (step 10 is a decoy)."""
    rows = []
    for step in (10, 20):
        for seed in (0, 1):
            for c, comparison in enumerate(tables.ALIGNMENT_COMPARISONS):
                for m, map_ in enumerate(tables.MAPS):
                    base = 0.1 * c + 0.01 * m + 0.1 * seed + (0 if step == 20 else 5)
                    for token, offset in enumerate((-0.05, 0.05)):
                        rows.append(("main", seed, step, comparison, map_, token, base + offset))
    return pd.DataFrame(rows, columns=["pair", "seed", "step", "comparison", "map", "token_id", "cosine"])


def test_table1_cells_and_paper_numbers():
    table = tables.table1(_alignment()).set_index("comparison")
    # Input(U) -> Tied is comparison 2; linear map 2: seeds 0.22 and 0.32.
    row = table.loc["Input(U) -> Tied"]
    assert row["linear"] == "0.270 ± 0.050"
    assert row["linear_mean"] == pytest.approx(0.27)
    assert row["linear (paper)"] == "0.525"
    assert table.loc["Input(U) -> Output(U)", "identity"] == "0.050 ± 0.050"
    assert table.loc["Output(U) -> Tied", "orthogonal (paper)"] == "0.669"
    assert list(table.index) == list(tables.ALIGNMENT_COMPARISONS.values())
    assert (table["n_seeds"] == 2).all()


def test_table1_at_a_chosen_step():
    table = tables.table1(_alignment(), step=10).set_index("comparison")
    assert table.loc["Input(U) -> Tied", "linear_mean"] == pytest.approx(5.27)


def test_markdown_shows_header_rows_and_hides_numbers(tmp_path):
    table = tables.table1(_alignment())
    tables.write_table(table, tmp_path / "t1.csv", tmp_path / "t1.md")
    lines = (tmp_path / "t1.md").read_text().splitlines()
    assert lines[0] == (
        "| pair | comparison | identity | identity (paper) | orthogonal | orthogonal (paper)"
        " | linear | linear (paper) | n_seeds |"
    )
    assert lines[1] == "|" + "---|" * 9
    assert lines[4] == "| main | Input(U) -> Tied | 0.250 ± 0.050 | 0.001 | 0.260 ± 0.050 | 0.420 | 0.270 ± 0.050 | 0.525 | 2 |"
    assert len(lines) == 5
    csv = pd.read_csv(tmp_path / "t1.csv")
    assert csv["linear_ci_high"].iloc[2] == pytest.approx(0.32)


def test_markdown_escapes_pipes_and_blanks_nan():
    frame = pd.DataFrame({"a": ["x|y"], "b": [math.nan], "c": [1.23456]})
    assert tables.markdown(frame).splitlines()[2] == "| x\\|y |  | 1.235 |"


def test_table5_knn_per_pair_and_k():
    rows = [
        (pair, seed, 7, comparison, k, 0.1 * i + 0.01 * k + 0.02 * seed)
        for pair in ("main", "family")
        for seed in (0, 1, 2)
        for i, comparison in enumerate(tables.KNN_COMPARISONS)
        for k in (5, 10)
    ]
    knn = pd.DataFrame(rows, columns=["pair", "seed", "step", "comparison", "k", "overlap"])
    table = tables.table5(knn).set_index(["pair", "k"])
    assert table.loc[("family", 10), "tied_vs_output_u_mean"] == pytest.approx(0.22)
    assert table.loc[("family", 10), "Tied vs Output(U) (paper)"] == "0.408"
    assert table.loc[("main", 5), "Tied vs Output(U) (paper)"] == ""
    assert table.loc[("main", 10), "Input(U) vs Output(U)"].startswith("0.320 ± ")


def _scaling():
    cos = {("tied", "input_u"): 0.20, ("tied", "output_u"): 0.40, ("tied_x5", "input_u"): 0.22, ("tied_x5", "output_u"): 0.37}
    rows = [
        ("main", seed, step, variant, reference, value + step / 1000)
        for seed in (0,)
        for step in (100, 300)
        for (variant, reference), value in cos.items()
    ]
    return pd.DataFrame(rows, columns=["pair", "seed", "step", "variant", "reference", "cosine"])


def test_table2_final_step_and_table6_early_step():
    final = tables.table2(_scaling()).set_index("variant")
    assert final.loc["tied_x5", "vs Input(U)"] == "0.520"  # one seed: the value alone
    assert final.loc["tied_x5", "vs Output(U) (paper)"] == "0.369"
    assert (final["step"] == 300).all()
    early = tables.table6(_scaling(), 100).set_index("variant")
    assert early.loc["tied", "vs Output(U)"] == "0.500"
    assert early.loc["tied", "vs Output(U) (paper)"] == "0.197"
    assert early.loc["tied_x5", "vs Output(U) (paper)"] == ""  # the paper's Table 6 has no x5 row
    with pytest.raises(PipelineError):
        tables.table6(_scaling(), 50)


def test_table7_loss_and_perplexity_at_last_step():
    rows = [
        (arch, variant, seed, step, 3.0 + 0.2 * seed + step / 100, float(np.exp(3.0 + 0.2 * seed)))
        for arch in ("olmo",)
        for variant in ("tied", "tied_x5")
        for seed in (0, 1)
        for step in (0, 300)
    ]
    loss = pd.DataFrame(rows, columns=["arch", "variant", "seed", "step", "val_loss", "perplexity"])
    table = tables.table7(loss).set_index("variant")
    assert table.loc["tied", "val loss"] == "6.100 ± 0.100"
    assert table.loc["tied", "perplexity_mean"] == pytest.approx((np.exp(3.0) + np.exp(3.2)) / 2)
    assert table.loc["tied_x5", "perplexity (paper)"] == "36.64 (WikiText-2)"

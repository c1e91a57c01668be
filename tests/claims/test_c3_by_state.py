"""C3 state by state: the claims table's C3s0 row (tied minus untied KL at state 0, above the floors, against the
matched null), and the per-state gaps of the lens-budget and depth tables beside the paper's."""

import math

import numpy as np
import pandas as pd
import pytest

from tying import paper
from tying.claims import statistics, verdicts
from tying.claims.definitions import CLAIMS
from tying.stats import mean_ci

SEEDS = (0, 1, 2)
N_WINDOWS = 10
# A 4-block pair (states 0..4; C3's early half: states 0 and 1). Per seed s: state-0 KL tied 3 + s/10, untied
# 2 + s/20; state 1 tied 1.0, untied 1.2; states 2, 3 0.5 both; each window's KL the state's plus the same
# window offset for both models. Floors: tied 0.5 + s/100, untied 0.3; the readout's 0.02 and 0.01. The matched
# null run: the untied model's KL plus 0.01 x (s + 1) at state 0, plus 0.03 at state 1.
STATE0 = {"tied": lambda s: 3 + s / 10, "untied": lambda s: 2 + s / 20}
LATER = {"tied": (1.0, 0.5, 0.5, 0.0), "untied": (1.2, 0.5, 0.5, 0.0)}
FLOORS = {"tied": (lambda s: 0.5 + s / 100, 0.02), "untied": (lambda s: 0.3, 0.01)}


def planted(role, seed):
    return (STATE0[role](seed), *LATER[role])


def lens_frames():
    """(lens metric, per-window frame, null metric) of the planted pair."""
    offsets = np.linspace(-0.05, 0.05, N_WINDOWS)
    windows = pd.DataFrame(
        [
            {
                "pair": "main",
                "role": role,
                "seed": s,
                "window": w,
                "layer": layer,
                "kl_bits": kl + offsets[w] * (layer < 4),
                "kl_check_bits": kl + offsets[w] if layer < 2 else np.nan,
                "check_step": 300,
                "steps": 400,
            }
            for role in ("tied", "untied")
            for s in SEEDS
            for w in range(N_WINDOWS)
            for layer, kl in enumerate(planted(role, s))
        ]
    )
    metric = windows.groupby(["pair", "role", "seed", "layer"])["kl_bits"].mean().reset_index()
    metric = metric.assign(
        lens="tuned",
        model=metric["role"].map({"tied": "olmo/tied", "untied": "olmo/untied"}),
        floor_bits=[FLOORS[r][0](s) for r, s in zip(metric["role"], metric["seed"])],
        readout_floor_bits=metric["role"].map({r: f[1] for r, f in FLOORS.items()}),
    )
    untied = metric[metric["role"] == "untied"]
    null = untied.assign(
        role="null",
        model="olmo/untied_b",
        kl_bits=untied["kl_bits"]
        + np.select([untied["layer"] == 0, untied["layer"] == 1], [0.01 * (untied["seed"] + 1), 0.03], 0.0),
    )
    return metric, windows, null


def test_the_claims_tables_state_0_row_is_the_hand_computed_gap_with_its_floors_and_matched_null():
    metric, windows, null = lens_frames()
    stats = statistics.claim_statistics(lens=metric, lens_windows=windows, lens_null=null)
    table = verdicts.claims_table(stats).set_index("claim")
    gaps = [STATE0["tied"](s) - STATE0["untied"](s) for s in SEEDS]  # 1.00, 1.05, 1.10
    np.testing.assert_allclose(stats["C3s0"].values, gaps, atol=1e-12)
    row = table.loc["C3s0"]
    mean, low, high = mean_ci(gaps)  # the windows add nothing: both models share each window's offset
    assert (row["mean"], row["ci_low"], row["ci_high"]) == pytest.approx((1.05, low, high))
    assert high - 1.05 == pytest.approx(4.302652729911275 * 0.05 / math.sqrt(3))
    assert row["interval"] == (
        "Student-t 95% over 3 seeds and 95% bootstrap over 10 validation windows, half-widths in quadrature"
    )
    assert row["paper_value"] == pytest.approx(8.86 - 7.01) and row["verdict"] == "holds"
    # above the floors: gap - (0.5 + s/100 - 0.3) = 0.80, 0.84, 0.88
    above = [g - (0.2 + s / 100) for g, s in zip(gaps, SEEDS)]
    assert f"above the state-0 floors (KL - floor, tied minus untied): {format_interval(above)}" in row["detail"]
    assert (
        "floors tied 0.510, untied 0.300 bits, the readout's further floor tied 0.020, untied 0.010 bits"
        in row["detail"]
    )
    # the matched null at state 0: untied minus untied_b = -0.01 (s + 1)
    null_text = format_interval([-0.01 * (s + 1) for s in SEEDS])
    assert (
        f"matched null (untied minus olmo/untied_b: another start, the same batches): {null_text} (Student-t 95% "
        "over 3 seeds)"
    ) in row["detail"]
    assert row["detail"].startswith("certified: along training (300 -> 400 steps), C3s0 change by seed 0: +0.0000")
    # C3 itself: the early half's mean, unchanged by the new row; its detail gives the matched null over states 0-1
    c3 = [(g + (1.0 - 1.2)) / 2 for g in gaps]
    assert table.loc["C3", "mean"] == pytest.approx(np.mean(c3))
    assert format_interval([-(0.01 * (s + 1) + 0.03) / 2 for s in SEEDS]) in table.loc["C3", "detail"]
    assert "above the state-0 floors" not in table.loc["C3", "detail"]


def format_interval(values):
    mean, low, high = mean_ci(values)
    return f"{mean:.3f} [{low:.3f}, {high:.3f}]"


def test_the_paper_value_of_c3_at_state_0_is_figure_2s_input_layer_gap():
    assert CLAIMS["C3s0"].paper_value == pytest.approx(paper.FIG2_KL["tied"][0] - paper.FIG2_KL["untied"][0])
    assert CLAIMS["C3s0"].paper == "state 0 of 16: 8.86 vs 7.01 bits (+1.85)"
    assert list(CLAIMS).index("C3s0") == list(CLAIMS).index("C3") + 1

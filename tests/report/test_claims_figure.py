"""figures/claims.pdf: one panel per claim, drawing the claims tables' own numbers at the right places."""

import math

import pandas as pd
import pytest

from tying.claims.definitions import ALL_TOKENS
from tying.errors import PipelineError
from tying.report.figures.claims_summary import VERDICT_COLOURS, plot_claims_summary, summary_rows

NAN = math.nan
COLUMNS = [
    "pair",
    "claim",
    "token_set",
    "mean",
    "ci_low",
    "ci_high",
    "in_sample_mean",
    "chance",
    "paper",
    "paper_value",
    "verdict",
]


def _table(rows):
    return pd.DataFrame(rows, columns=COLUMNS)


# This build: the first pair's all-token rows, a comparable-token row and a control's row that must not be drawn.
THIS = _table(
    [
        (
            "main",
            "LM",
            ALL_TOKENS,
            -0.42,
            -0.43,
            -0.41,
            NAN,
            "",
            "not in the paper (its models are trained language models)",
            NAN,
            "holds",
        ),
        (
            "main",
            "C1",
            ALL_TOKENS,
            0.348,
            0.341,
            0.355,
            0.223,
            "0.004",
            "0.719 vs 0.525 (+0.194), in sample",
            0.194,
            "holds",
        ),
        ("main", "C1", "drawn >= 100", 0.9, 0.8, 1.0, NAN, "0.5", "0.719 vs 0.525 (+0.194), in sample", 0.194, "holds"),
        (
            "main",
            "C3",
            ALL_TOKENS,
            -0.010,
            -0.040,
            0.020,
            NAN,
            "",
            "states 0-7 of 16 (+1.01)",
            1.014,
            "lens not converged",
        ),
        (
            "main",
            "C5",
            ALL_TOKENS,
            0.681,
            0.673,
            0.689,
            NAN,
            "",
            "70-83% over the first 1000 of 10000 steps",
            NAN,
            "holds",
        ),
        (
            "main",
            "C6b",
            ALL_TOKENS,
            -0.189,
            -0.211,
            -0.167,
            NAN,
            "-0.139",
            "qualitative: rise up to ~1e4 occurrences, then fall",
            NAN,
            "not testable here",
        ),
        (
            "control",
            "C1",
            ALL_TOKENS,
            -0.128,
            -0.156,
            -0.099,
            NAN,
            "-0.017",
            "0.719 vs 0.525 (+0.194), in sample",
            0.194,
            "does not hold",
        ),
    ]
)
# Another build (the trained regime): its own first pair, one seed on C1 (no interval), no C5 row.
OTHER = _table(
    [
        (
            "d96_l3",
            "C1",
            ALL_TOKENS,
            -0.05,
            NAN,
            NAN,
            -0.02,
            "0.001",
            "0.719 vs 0.525 (+0.194), in sample",
            0.194,
            "direction only (1 seed)",
        ),
        (
            "d96_l3",
            "C6b",
            ALL_TOKENS,
            -0.198,
            -0.218,
            -0.178,
            NAN,
            "-0.133",
            "qualitative: rise up to ~1e4 occurrences, then fall",
            NAN,
            "does not hold",
        ),
    ]
)


def _by_gid(ax, gid):
    return [a for a in ax.get_children() if a.get_gid() == gid]


@pytest.fixture(scope="module")
def figure(tmp_path_factory):
    path = tmp_path_factory.mktemp("claims") / "claims.pdf"
    fig = plot_claims_summary(summary_rows({"this build": THIS, "trained": OTHER}), path)
    assert path.read_bytes().startswith(b"%PDF")
    panels = {ax.get_title(loc="left").split(":")[0]: ax for ax in fig.axes if ax.axison}
    return fig, panels


def test_one_panel_per_claim_of_the_first_pair_in_claims_order(figure):
    _, panels = figure
    assert list(panels) == ["LM", "C1", "C3", "C5", "C6b"]
    assert panels["C1"].get_xlabel() == "Δ mean cosine; holds if > 0"
    assert panels["LM"].get_xlabel() == "Δ validation loss (nats); holds if < 0"


def test_ours_is_the_tables_mean_and_interval_coloured_by_verdict(figure):
    _, panels = figure
    c1 = panels["C1"]
    point = _by_gid(c1, "ours:this build")[0]
    assert point.get_xdata()[0] == pytest.approx(0.348) and point.get_ydata()[0] == 1
    assert point.get_color() == VERDICT_COLOURS["holds"]
    bar = next(c for c in c1.containers if c.lines[0] is point).lines[2][0].get_segments()[0]
    assert [x for x, _ in bar] == pytest.approx([0.341, 0.355])
    assert _by_gid(c1, "in_sample:this build")[0].get_xdata()[0] == pytest.approx(0.223)
    assert _by_gid(c1, "chance:this build")[0].get_xdata()[0] == pytest.approx(0.004)
    verdict = _by_gid(c1, "verdict:this build")[0]
    assert verdict.get_text() == "holds" and verdict.get_color() == VERDICT_COLOURS["holds"]
    other = _by_gid(c1, "ours:trained")[0]  # one seed: the point alone, in the "direction only" colour
    assert other.get_xdata()[0] == pytest.approx(-0.05) and other.get_ydata()[0] == 2
    assert other.get_color() == VERDICT_COLOURS["direction only"]
    assert _by_gid(c1, "verdict:trained")[0].get_text() == "direction only (1 seed)"
    c3 = panels["C3"]
    assert _by_gid(c3, "ours:this build")[0].get_color() == VERDICT_COLOURS["lens not converged"]


def test_the_paper_is_drawn_where_numeric_and_written_where_not(figure):
    _, panels = figure
    assert _by_gid(panels["C1"], "paper")[0].get_xdata().tolist() == [0.194]
    assert _by_gid(panels["C3"], "paper")[0].get_xdata().tolist() == [1.014]
    assert _by_gid(panels["C5"], "paper")[0].get_xdata() == pytest.approx([0.70, 0.83])  # its 70-83% as a bar
    assert _by_gid(panels["C6b"], "paper")[0].get_text() == "rise up to ~1e4 occurrences, then fall"
    assert _by_gid(panels["LM"], "paper")[0].get_text() == "not in the paper"


def test_thresholds_and_a_claim_missing_from_one_build(figure):
    _, panels = figure
    assert set(_by_gid(panels["C5"], "threshold")[0].get_xdata()) == {0.5}
    assert set(_by_gid(panels["C6b"], "threshold")[0].get_xdata()) == {0.0}
    texts = [t.get_text() for t in panels["C5"].texts]
    assert "not in this build" in texts and not _by_gid(panels["C5"], "ours:trained")
    assert [t.get_text() for t in panels["LM"].get_yticklabels()] == ["paper", "this build", "trained"]  # left column


def test_summary_rows_keep_the_first_pair_on_all_tokens():
    rows = summary_rows({"this build": THIS, "trained": OTHER})
    assert rows[rows["build"] == "this build"]["claim"].tolist() == ["LM", "C1", "C3", "C5", "C6b"]
    assert rows.loc[(rows["build"] == "this build") & (rows["claim"] == "C1"), "mean"].item() == 0.348
    assert rows["chance"].isna().tolist() == [True, False, False, True, True, False, False]
    with pytest.raises(PipelineError, match="no claims"):
        plot_claims_summary(rows.iloc[:0], "unused.pdf")

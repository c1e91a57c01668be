"""Each figure function writes a PDF and draws the numbers its metric frame provides."""

import numpy as np
import pandas as pd
import pytest

from tying.errors import PipelineError
from tying.metrics.norm_frequency import binned_norms
from tying.report.figures.alignment_hist import plot_alignment_hist
from tying.report.figures.claims_over_training import plot_claims_over_training
from tying.report.figures.evolution import plot_evolution
from tying.report.figures.grad_flow import plot_grad_flow
from tying.report.figures.norm_frequency import plot_norm_frequency

RNG = np.random.default_rng(0)


def _is_pdf(path):
    data = path.read_bytes()
    return data.startswith(b"%PDF") and len(data) > 1000


def test_alignment_hist_marks_the_table_means_over_the_chance_level(tmp_path):
    rows = [
        (
            "main",
            seed,
            300,
            comparison,
            "linear",
            "in_sample",
            target,
            token,
            (mean + 0.1 * seed if target == "true" else 0.15) + (0.05 if token % 2 else -0.05),
        )
        for seed in (0, 1)
        for comparison, mean in (("input_u->tied", 0.5), ("output_u->tied", 0.7), ("input_u->output_u", 0.0))
        for target in ("true", "permuted")
        for token in range(50)
    ]
    alignment = pd.DataFrame(
        rows, columns=["pair", "seed", "step", "comparison", "map", "scored", "target", "token_id", "cosine"]
    )
    held_out = alignment.assign(scored="held_out", cosine=-1.0)  # must not reach the figure
    fig = plot_alignment_hist(pd.concat([alignment, held_out]), tmp_path / "fig1.pdf")
    assert _is_pdf(tmp_path / "fig1.pdf")
    ax = fig.axes[0]
    dashed = sorted(line.get_xdata()[0] for line in ax.lines if line.get_linestyle() == "--")
    assert dashed == pytest.approx([0.55, 0.75])  # Table 1's in-sample means over seeds
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == [
        "Input(U) -> Tied (mean 0.550)",
        "Output(U) -> Tied (mean 0.750)",
        "chance: rows permuted (mean 0.150)",
    ]
    grey = [p for p in ax.patches if p.get_facecolor()[:3] == pytest.approx((0.6, 0.6, 0.6))]
    assert grey and min(p.get_x() for p in grey) == pytest.approx(0.1, abs=0.01)  # the chance histogram
    with pytest.raises(PipelineError):
        plot_alignment_hist(alignment, tmp_path / "none.pdf", pair="family")
    assert not (tmp_path / "none.pdf").exists()
    assert ax.get_title() == "main, step 300: tokens pooled over 2 seeds"
    released = plot_alignment_hist(
        alignment[alignment["seed"] == 0].assign(step=0), tmp_path / "local.pdf", models="tied-dir vs untied-dir"
    )
    assert released.axes[0].get_title() == "main, tied-dir vs untied-dir: one pair of models"  # not "step 0"


def test_evolution_draws_drift_and_change(tmp_path):
    steps = np.array([0, 100, 200])
    rows = [
        ("main", seed, matrix, step, drift, np.nan if step == 0 else 0.99)
        for seed in (0, 1, 2)
        for matrix, rate in (("input", 0.1), ("output", 0.4))
        for step, drift in zip(steps, 1 - rate * steps / 200 + 0.01 * seed)
    ]
    evolution = pd.DataFrame(rows, columns=["run", "seed", "matrix", "step", "drift", "change"])
    fig = plot_evolution(evolution, tmp_path / "fig3.pdf")
    assert _is_pdf(tmp_path / "fig3.pdf")
    top, bottom = fig.axes
    # Output line: mean over seeds of drift = 1 - 0.4 * step / 200 + 0.01.
    ys = [tuple(np.round(line.get_ydata(), 6)) for line in top.lines]
    assert (1.01, 0.81, 0.61) in ys
    drawn = [line.get_xdata().tolist() for line in bottom.lines if len(line.get_xdata())]
    assert drawn == [[100, 200], [100, 200]]  # change is NaN at step 0


def _grad_flow():
    steps = np.arange(60)
    g_in, g_out = np.exp(RNG.normal(0, 0.3, 60)), 4 * np.exp(RNG.normal(0, 0.3, 60))
    return pd.DataFrame(
        {
            "pair": "main",
            "seed": 0,
            "variant": "tied",
            "step": steps,
            "g_in": g_in,
            "g_out": g_out,
            "g_in_roll": 0.7,
            "g_out_roll": 3.0,  # constants: the plot must draw these, not its own means
            "in_share": g_in / (g_in + g_out),
            "out_share": g_out / (g_in + g_out),
            "proxy_out_share": 0.6,
        }
    )


def test_grad_flow_draws_the_frames_rolling_means(tmp_path):
    fig = plot_grad_flow(_grad_flow(), tmp_path / "fig4.pdf")
    assert _is_pdf(tmp_path / "fig4.pdf")
    left, right = fig.axes
    assert left.get_yscale() == "log"
    flat = sorted(line.get_ydata()[0] for line in left.lines if np.ptp(line.get_ydata()) == 0)
    assert flat == pytest.approx([0.7, 3.0])
    assert right.get_ylim() == (0, 100)
    proxy = [line for line in right.lines if line.get_linestyle() == "--"]
    assert len(proxy) == 1 and proxy[0].get_ydata() == pytest.approx([40.0] * 60)  # 100 x (1 - proxy share)
    with pytest.raises(PipelineError):
        plot_grad_flow(_grad_flow(), tmp_path / "none.pdf", seed=3)


def test_norm_frequency_three_panels(tmp_path):
    counts = np.r_[0, np.floor(10 ** RNG.uniform(0, 5, 299))].astype(int)
    rows = pd.concat(
        pd.DataFrame(
            {
                "pair": "main",
                "seed": 0,
                "matrix": m,
                "token_id": np.arange(300),
                "drawn": counts,
                "per_million": counts * 2.0,
                "norm": 1 + scale * np.log10(np.maximum(counts, 1)),
            }
        )
        for m, scale in (("untied_input", 0.0), ("untied_output", 0.3), ("tied", 0.5))
    )
    fig = plot_norm_frequency(rows, tmp_path / "fig5.pdf")
    assert _is_pdf(tmp_path / "fig5.pdf")
    assert [ax.get_title() for ax in fig.axes[:3]] == ["untied input", "untied output", "tied"]
    panels = fig.axes[:3]  # then their top axes: draws per million
    assert [len(ax.collections[0].get_offsets()) for ax in panels] == [299] * 3  # never drawn: left out
    line = fig.axes[2].lines[0]  # the binned means the C6 criteria use, sparse bins merged
    binned = binned_norms(rows[rows["matrix"] == "tied"])
    assert line.get_xdata() == pytest.approx(binned["log_count"].to_numpy())
    assert line.get_ydata() == pytest.approx(binned["norm"].to_numpy())


def test_a_figure_rule_without_a_figure_is_one_line(tmp_path):
    from tying.report.figures.registry import draw

    with pytest.raises(
        PipelineError, match=r"^no figure is registered for rule 'fig99' \(tying.report.figures.registry: fig1, "
    ):
        draw("fig99", pd.DataFrame(), tmp_path / "fig99.pdf", pair="main")
    assert not (tmp_path / "fig99.pdf").exists()


def test_claims_over_training_opens_with_the_losses_against_both_count_tables(tmp_path):
    steps = [0, 100, 200]
    table = pd.DataFrame(
        [
            {
                "pair": "main",
                "claim": "C1",
                "step": s,
                "tokens": s * 1024,
                "mean": 0.1 * s / 100,
                "ci_low": 0.0,
                "ci_high": 0.3,
                "chance_mean": 0.0,
                "paper_value": 0.194,
            }
            for s in steps[1:]
        ]
    )
    quality = pd.DataFrame(
        [
            {
                "pair": "main",
                "seed": seed,
                "role": role,
                "step": s,
                "val_loss": 7.0 - s / 50 - (role == "untied") * 0.1 + 0.01 * seed,
                "bigram_loss": 7.0 - s / 100,
                "unigram_loss": 6.0,
            }
            for seed in (0, 1)
            for role in ("tied", "untied", "tied_x5")
            for s in steps
        ]
    )
    fig = plot_claims_over_training(table, tmp_path / "cot.pdf", quality=quality)
    assert _is_pdf(tmp_path / "cot.pdf")
    loss, c1 = fig.axes[:2]
    assert "validation loss" in loss.get_title() and "C1" in c1.get_title()
    lines = {tuple(np.round(line.get_ydata(), 3)) for line in loss.lines}
    assert (7.005, 5.005, 3.005) in lines and (6.905, 4.905, 2.905) in lines  # tied, untied: means over seeds
    assert (7.0, 6.0, 5.0) in lines and (6.0, 6.0, 6.0) in lines  # the bigram and unigram tables
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert {"tied loss", "untied loss", "tied_x5 loss", "bigram table", "unigram table"} <= set(legend)

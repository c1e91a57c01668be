"""C7 as a dose-response: (a) C7a and C7b against the input-path gradient scale, with the paper's x5 values;
(b) the input path's share of the embedding gradient; (c) the LM margin over the bigram table; where the dose
table has them, (d) C7a and C7b over their ceilings and (e) at the tied run's equal margin."""

import matplotlib.pyplot as plt

from tying import paper
from tying.errors import PipelineError
from tying.report.figures import style

PAPER_DOSE = 5  # the paper's C7 values are its x5 run's


def plot_c7_dose(table, path):
    """Draw the dose table (tying.claims.c7_dose.dose_table) as a three-panel vector PDF, each measure's mean and
    95% interval against the dose on a log axis, zero thin black. Returns the (closed) figure."""
    if table.empty:
        raise PipelineError("no C7 doses to plot")
    style.setup()
    referenced = "C7a_norm_mean" in table.columns
    fig, grid = plt.subplots(
        2 if referenced else 1,
        3,
        figsize=(2 * style.COLUMN_WIDTH, 4.4 if referenced else 2.3),
        layout="constrained",
        squeeze=False,
    )
    axes = grid.ravel()
    _pair(axes[0], table, "", "(a) cosine change vs the tied run, same step")
    for cid, colour in (("C7a", style.PALETTE["input"]), ("C7b", style.PALETTE["output"])):
        axes[0].plot(
            [PAPER_DOSE],
            [paper.CLAIMS[cid][1]],
            marker="*",
            color=colour,
            markeredgecolor="black",
            markersize=8,
            linestyle="none",
            label=f"paper {cid} (x{PAPER_DOSE})",
        )
    axes[0].legend(fontsize="xx-small", frameon=False)
    _panel(axes[1], table, "in_share", style.PALETTE["scaled"], None)
    axes[1].set(title="(b) input path's gradient share", ylabel="g_in / (g_in + g_out)")
    _panel(axes[2], table, "margin", style.PALETTE["tied"], None)
    axes[2].set(title="(c) LM margin over bigram", ylabel="nats (below 0: better)")
    if referenced:
        _pair(axes[3], table, "_norm", "(d) over their ceilings (a second untied run's)", "share of the ceiling")
        _pair(axes[4], table, "_equal", "(e) vs the tied run at the same margin")
        _panel(axes[5], table, "equal_step", style.PALETTE["tied"], None)
        axes[5].set(title="(f) the tied run's step at that margin", ylabel="step")
    for ax in axes:
        ax.set_xscale("log")
        ax.set_xticks(table["dose"], [f"x{d:g}" for d in table["dose"]])
        ax.minorticks_off()
        ax.set_xlabel("input-gradient scale")
        ax.title.set_fontsize("x-small")
    style.save(fig, path)
    return fig


def _pair(ax, table, suffix, title, ylabel="cosine difference"):
    """C7a<suffix> and C7b<suffix> on one panel."""
    _panel(ax, table, f"C7a{suffix}", style.PALETTE["input"], "toward Input(U) (C7a)")
    _panel(ax, table, f"C7b{suffix}", style.PALETTE["output"], "toward Output(U) (C7b)")
    ax.set(title=title, ylabel=ylabel)


def _panel(ax, table, measure, colour, label):
    mean = table[f"{measure}_mean"]
    err = [(mean - table[f"{measure}_low"]).fillna(0), (table[f"{measure}_high"] - mean).fillna(0)]
    ax.errorbar(
        table["dose"], mean, yerr=err, color=colour, marker="o", markersize=3, linewidth=1, capsize=2, label=label
    )
    ax.axhline(0, color="black", linewidth=0.5)

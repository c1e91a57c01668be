"""C3 against depth: (a) the early-half gap of each depth with its interval and verdict beside the paper's 16
layers; (b) each depth's tuned-lens KL by state as a fraction of its depth, tied and untied, the paper's curves
behind them."""

import math
import textwrap

import matplotlib.pyplot as plt
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import NullLocator

from tying import paper
from tying.claims.c3_by_depth import EARLY, STATE, paper_early
from tying.errors import PipelineError
from tying.report.figures import style

OURS = "0.2"
PANEL_COLUMNS = 2  # of (b)'s small panels


def plot_c3_by_depth(table, path):
    """Draw the C3-by-depth table (tying.claims.c3_by_depth.c3_by_depth rows) as a two-part vector PDF: (a) the
    early-half rows' mean and interval against layers (log axis), each depth's verdict above it, the paper's C3 at
    its 16 layers as a star and the threshold (0) thin black; (b) one small panel a depth of the state rows' tied and
    untied KL against fraction (state / layers), the paper's FIG2_KL dashed behind, C3's early states shaded.
    Returns the (closed) figure."""
    early, states = (table[table["scope"] == scope] for scope in (EARLY, STATE))
    if early.empty:
        raise PipelineError("no C3-by-depth rows to plot")
    cells = list(early.sort_values("layers")["cell"])
    style.setup()
    fig = plt.figure(figsize=(2 * style.COLUMN_WIDTH, 3.3), layout="constrained")
    left, right = fig.subfigures(1, 2, width_ratios=[1, 1.15])
    _depth_panel(left.subplots(), early)
    n_rows = math.ceil(len(cells) / PANEL_COLUMNS)
    axes = right.subplots(n_rows, PANEL_COLUMNS, sharex=True, sharey=True, squeeze=False)
    for i, (ax, cell) in enumerate(zip(axes.ravel(), cells)):
        _state_panel(
            ax,
            states[states["cell"] == cell],
            early[early["cell"] == cell].iloc[0],
            bottom=i >= len(cells) - PANEL_COLUMNS,
            left=i % PANEL_COLUMNS == 0,
        )
    for ax in axes.ravel()[len(cells) :]:
        ax.set_axis_off()
    right.suptitle("(b) tuned-lens KL by state", fontsize="x-small")
    roles = ("tied", "untied")
    handles = [
        Line2D([], [], color=OURS, marker="o", markersize=3),
        Line2D([], [], color="black", marker="*", linestyle="none", markersize=7),
    ]
    handles += [Line2D([], [], color=style.PALETTE[r], marker="o", markersize=2.5) for r in roles]
    handles += [Line2D([], [], color=style.PALETTE[r], linestyle="--", linewidth=0.8, alpha=0.6) for r in roles]
    handles += [Patch(color="0.85")]
    labels = [
        "C3, ours (95% interval)",
        f"C3, paper ({paper.FIG2_LAYERS} layers)",
        "tied",
        "untied",
        "paper tied",
        "paper untied",
        "C3's early states",
    ]
    fig.legend(
        handles,
        labels,
        loc="outside lower center",
        ncols=4,
        frameon=False,
        fontsize="x-small",
        handlelength=1.8,
        columnspacing=1.0,
    )
    style.save(fig, path)
    return fig


def _depth_panel(ax, early):
    early = early.sort_values("layers")
    x = early["layers"].astype(float)
    ax.plot(x, early["mean"], color=OURS, marker="o", markersize=3, linewidth=1)
    ax.errorbar(
        x,
        early["mean"],
        [early["mean"] - early["ci_low"], early["ci_high"] - early["mean"]],
        color=OURS,
        linestyle="none",
        linewidth=1.2,
        capsize=2,
    )
    _, _, _, gap = paper_early()
    ax.plot([paper.FIG2_LAYERS], [gap], color="black", marker="*", markersize=8, linestyle="none")
    ax.axhline(0, color="black", linewidth=0.5)
    for row in early.itertuples():
        top = row.ci_high if not math.isnan(row.ci_high) else row.mean
        ax.annotate(
            textwrap.fill(row.verdict, 12),
            (row.layers, top),
            xytext=(0, 3),
            textcoords="offset points",
            ha="center",
            va="bottom",
            fontsize=5,
            linespacing=0.9,
        )
    ax.annotate(
        f"{gap:+.2f}",
        (paper.FIG2_LAYERS, gap),
        xytext=(0, -5),
        textcoords="offset points",
        ha="center",
        va="top",
        fontsize=5,
    )
    depths = sorted({*early["layers"], paper.FIG2_LAYERS})
    ax.set_xscale("log")
    ax.set_xticks(depths, [str(d) for d in depths])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlim(min(depths) / 1.25, max(depths) * 1.25)
    low = min(0.0, early["ci_low"].min(skipna=True), early["mean"].min())
    ax.set_ylim(low - 0.1, max(gap, early["ci_high"].max(skipna=True), early["mean"].max()) + 0.3)
    ax.set_xlabel("depth (layers, log scale)", fontsize="x-small")
    ax.set_ylabel("C3: tied − untied early-half KL (bits)", fontsize="x-small")
    ax.set_title("(a) C3 against depth", fontsize="x-small")
    ax.tick_params(labelsize="xx-small")


def _state_panel(ax, states, early, bottom, left):
    layers = int(early["layers"])
    ax.axvspan(-0.05, (math.ceil(layers / 2) - 0.5) / layers, color="0.85", linewidth=0)
    for role in ("tied", "untied"):
        ax.plot(
            [s / paper.FIG2_LAYERS for s in range(paper.FIG2_LAYERS + 1)],
            paper.FIG2_KL[role],
            color=style.PALETTE[role],
            linestyle="--",
            linewidth=0.8,
            alpha=0.6,
        )
        ax.plot(
            states["fraction"],
            states[f"{role}_bits"],
            color=style.PALETTE[role],
            marker="o",
            markersize=2.5,
            linewidth=1,
        )
    ax.set_title(f"{layers} layers, {int(early['steps']):,} steps: C3 {early['mean']:+.2f}", fontsize=6, pad=2)
    ax.set_xlim(-0.05, 1.05)
    ax.set_xticks([0, 0.5, 1])
    ax.tick_params(labelsize="xx-small", pad=1)
    if bottom:
        ax.set_xlabel("state / layers", fontsize="x-small")
    if left:
        ax.set_ylabel("KL (bits)", fontsize="x-small")

"""Claims by exposure: each per-token claim against how often the runs drew the tokens, one panel a claim."""

import math

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.lines import Line2D
from matplotlib.ticker import NullLocator

from tying.claims.definitions import CLAIMS
from tying.claims.exposure import ALL_TOKENS
from tying.errors import PipelineError
from tying.report.figures import style

NCOLS = 3
COLOURS = ["tied", "input", "output", "mixture"]  # the claims pair, then the controls (negative, positive, mixture)


def stratum_x(low, high):
    """Where a stratum of draws [low, high) sits on a log axis: its geometric middle (an open top: low x 10^0.5)."""
    return math.sqrt(low * high) if math.isfinite(high) else low * 10**0.5


def plot_claims_by_exposure(table, path):
    """Panels of each claim (claims_by_exposure rows: pair, claim, stratum, draws_low, draws_high, mean,
    ci_low, ci_high, chance_mean, paper_value, left_out) against draws, log axis: one line a pair with its
    interval as a band, the all-token value as a short bar at the right edge, chance dotted, the paper's
    value dashed, the threshold thin black. Left-out strata are not drawn. Returns the (closed) figure."""
    if table.empty:
        raise PipelineError("no claims-by-exposure rows to plot")
    claims = [c for c in CLAIMS if c in set(table["claim"])]
    pairs = list(dict.fromkeys(table["pair"]))
    colours = {p: style.PALETTE[COLOURS[min(i, len(COLOURS) - 1)]] for i, p in enumerate(pairs)}
    n_rows = math.ceil(len(claims) / NCOLS)
    style.setup()
    fig, axes = plt.subplots(
        n_rows, NCOLS, figsize=(2 * style.COLUMN_WIDTH, 1.7 * n_rows + 0.5), layout="constrained", squeeze=False
    )
    for ax, claim in zip(axes.ravel(), claims):
        _panel(ax, table[table["claim"] == claim], claim, colours)
    for ax in axes.ravel()[len(claims) :]:
        ax.set_axis_off()
    handles = [Line2D([], [], color=colours[p], marker="o", markersize=2.5) for p in pairs]
    handles += [
        Line2D([], [], color="0.55", linestyle=":"),
        Line2D([], [], color="black", linestyle="--", linewidth=0.8),
    ]
    fig.legend(
        handles,
        pairs + ["chance", "paper"],
        loc="outside lower center",
        ncols=len(handles),
        frameon=False,
        fontsize="x-small",
        handlelength=1.5,
        columnspacing=0.8,
    )
    fig.suptitle(
        "Claims within strata of how often the runs drew the token (log scale); bands: Student-t 95% over "
        "seeds; bar at the right: all analysed tokens",
        fontsize="x-small",
    )
    style.save(fig, path)
    return fig


def _panel(ax, rows, claim, colours):
    shown = rows[(rows["stratum"] != ALL_TOKENS) & (rows["left_out"].fillna("") == "")]
    for pair, line in shown.groupby("pair", sort=False):
        x = [stratum_x(lo, hi) for lo, hi in zip(line["draws_low"], line["draws_high"])]
        ax.plot(x, line["mean"], color=colours[pair], marker="o", markersize=2.5, linewidth=1)
        ax.fill_between(x, line["ci_low"], line["ci_high"], color=colours[pair], alpha=0.25, linewidth=0)
        if line["chance_mean"].notna().any():
            ax.plot(x, line["chance_mean"], color=colours[pair], linestyle=":", linewidth=0.8, alpha=0.8)
    pooled = rows[(rows["stratum"] == ALL_TOKENS) & (rows["left_out"].fillna("") == "")]
    for pair, row in pooled.groupby("pair", sort=False):
        ax.axhline(row["mean"].iloc[0], xmin=0.96, xmax=1.0, color=colours[pair], linewidth=2)
    paper = CLAIMS[claim].paper_value
    if not np.isnan(paper):
        ax.axhline(paper, color="black", linestyle="--", linewidth=0.8)
    ax.axhline(CLAIMS[claim].threshold, color="black", linewidth=0.5)
    ax.set_xscale("log")
    strata = shown.drop_duplicates("stratum")
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticks(
        [stratum_x(lo, hi) for lo, hi in zip(strata["draws_low"], strata["draws_high"])], strata["stratum"].tolist()
    )
    ax.set_xlabel("draws", fontsize="x-small")
    ax.set_title(CLAIMS[claim].title, fontsize="small")
    ax.set_ylabel(CLAIMS[claim].unit, fontsize="x-small")
    ax.tick_params(labelsize="x-small")

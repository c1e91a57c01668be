"""Every claim at a glance: one small panel per claim of a claims table's first pair, each on its own scale.

A panel's rows are the paper, then each build (this one, and optionally another build's claims table beside
it, such as the trained regime's): ours as a point with its interval bar coloured by the verdict, whose text
stands at the row's right end; the in-sample value (the paper's convention) as an open circle; the chance
level as a black cross; the paper's value as a black diamond, its range as a black bar, or its words where it
gives no number; the claim's threshold as a thin black line.
"""

import math
import re
import textwrap

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from tying import paper
from tying.claims.definitions import ALL_TOKENS, CLAIMS
from tying.errors import PipelineError
from tying.report.figures import style

NCOLS = 3
VERDICT_COLOURS = {  # verdict (its start: "holds (one pair of models)" is "holds") -> colour, Okabe-Ito
    "holds": "#009e73",
    "does not hold": "#d55e00",
    "inconclusive": "#e69f00",
    "lens not converged": "#cc79a7",
    "not testable here": "#999999",
    "direction only": "#56b4e9",
}
BOX = {"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 0.5}  # behind text crossing a line


def summary_rows(tables):
    """{build label: claims table (results/tables/claims.parquet)} -> the rows the figure draws: each table's
    first pair on all analysed tokens, with columns build, pair, claim, mean, ci_low, ci_high, in_sample_mean,
    chance (the table's text as a number), paper, paper_value, verdict; claims in CLAIMS order."""
    frames = []
    for label, table in tables.items():
        rows = table[(table["pair"] == table["pair"].iloc[0]) & (table["token_set"] == ALL_TOKENS)]
        frames.append(rows.assign(build=label, chance=pd.to_numeric(rows["chance"], errors="coerce")))
    columns = [
        "build",
        "pair",
        "claim",
        "mean",
        "ci_low",
        "ci_high",
        "in_sample_mean",
        "chance",
        "paper",
        "paper_value",
        "verdict",
    ]
    out = pd.concat(frames, ignore_index=True)[columns]
    order = {cid: i for i, cid in enumerate(CLAIMS)}
    return out.sort_values("claim", key=lambda c: c.map(order), kind="stable", ignore_index=True)


def verdict_colour(verdict):
    """The colour of a verdict, by the VERDICT_COLOURS key it starts with."""
    colour = next((c for key, c in VERDICT_COLOURS.items() if verdict.startswith(key)), None)
    if colour is None:
        raise PipelineError(f"no colour for the verdict {verdict!r} (known: {', '.join(VERDICT_COLOURS)})")
    return colour


def plot_claims_summary(rows, path):
    """Draw `rows` (summary_rows) as a grid of panels, one per claim, with a row per build under the paper's;
    write the vector PDF `path` and return the (closed) figure."""
    if rows.empty:
        raise PipelineError("no claims to plot")
    claims = list(dict.fromkeys(rows["claim"]))
    builds = list(dict.fromkeys(rows["build"]))
    n_rows = math.ceil(len(claims) / NCOLS)
    style.setup()
    fig, axes = plt.subplots(
        n_rows,
        NCOLS,
        figsize=(2 * style.COLUMN_WIDTH + 0.4, (0.75 + 0.3 * len(builds)) * n_rows + 0.6),
        layout="constrained",
        squeeze=False,
    )
    for i, (ax, claim) in enumerate(zip(axes.ravel(), claims)):
        _panel(ax, rows[rows["claim"] == claim], claim, builds, labelled=i % NCOLS == 0)
    for ax in axes.ravel()[len(claims) :]:
        ax.set_axis_off()
    handles = [
        Line2D([], [], color="0.3", marker="o", markersize=3.5),
        Line2D([], [], color="0.3", marker="o", markerfacecolor="none", linestyle="none", markersize=3.5),
        Line2D([], [], color="black", marker="x", linestyle="none", markersize=3.5, markeredgewidth=0.8),
        Line2D([], [], color="black", marker="D", linestyle="none", markersize=3),
        Line2D([], [], color="black", linewidth=0.6),
    ]
    labels = ["ours, 95% interval", "ours, in sample (the paper's C1, C7)", "chance", "paper", "threshold"]
    shown = [v for v in VERDICT_COLOURS if rows["verdict"].str.startswith(v).any()]
    handles += [Line2D([], [], color=VERDICT_COLOURS[v], linewidth=4) for v in shown]
    fig.legend(
        handles,
        labels + shown,
        loc="outside lower center",
        ncols=5,
        frameon=False,
        fontsize="x-small",
        handlelength=1.5,
        columnspacing=1.0,
    )
    pairs = rows.drop_duplicates("build")
    fig.suptitle(
        "Each claim, ours (mean, 95% interval) beside the paper's value: "
        + "; ".join(f"{b}, pair {p}" for b, p in zip(pairs["build"], pairs["pair"])),
        fontsize="x-small",
    )
    style.save(fig, path)
    return fig


def _panel(ax, rows, claim, builds, labelled):
    """One claim: the paper's row at the top, then one row per build (y = its place in `builds`, plus 1)."""
    first = rows.iloc[0]
    ax.set_ylim(len(builds) + 0.5, -0.5)
    _paper_row(ax, claim, first["paper_value"], first["paper"])
    for y, build in enumerate(builds, start=1):
        row = rows[rows["build"] == build]
        if row.empty:
            ax.text(
                0.02,
                y,
                "not in this build",
                transform=ax.get_yaxis_transform(),
                fontsize="xx-small",
                color="0.5",
                va="center",
                bbox=BOX,
            )
            continue
        _build_row(ax, row.iloc[0], y, build)
    ax.plot([CLAIMS[claim].threshold] * 2, [-0.5, len(builds) + 0.5], color="black", linewidth=0.6, gid="threshold")
    ax.margins(x=0.08)
    criterion = CLAIMS[claim]
    ax.set_title(criterion.title, fontsize="x-small", loc="left")
    ax.set_xlabel(f"{criterion.unit}; holds if {criterion.direction} {criterion.threshold:g}", fontsize="xx-small")
    ax.xaxis.set_major_locator(MaxNLocator(nbins=5, steps=[1, 2, 2.5, 5, 10]))
    ax.set_yticks(range(len(builds) + 1), ["paper", *builds] if labelled else [])
    ax.tick_params(labelsize="xx-small", length=2)
    ax.grid(axis="y", visible=False)
    ax.grid(axis="x", color="0.93")


def _paper_row(ax, claim, value, text):
    if not np.isnan(value):
        ax.plot([value], [0], marker="D", color="black", markersize=3, linestyle="none", gid="paper")
    elif claim in paper.CLAIM_RANGES:
        ax.plot(paper.CLAIM_RANGES[claim], [0, 0], color="black", linewidth=2, solid_capstyle="butt", gid="paper")
    else:  # the paper's words: "qualitative: rise up to ~1e4 occurrences, then fall" -> its description
        words = re.sub(r"\s*\(.*\)$", "", text.removeprefix("qualitative: "))
        ax.text(
            0.02,
            0,
            textwrap.fill(words, 42),
            transform=ax.get_yaxis_transform(),
            fontsize="xx-small",
            va="center",
            style="italic",
            bbox=BOX,
            gid="paper",
        )


def _build_row(ax, row, y, build):
    colour = verdict_colour(row["verdict"])
    ax.errorbar(
        [row["mean"]],
        [y],
        xerr=[[row["mean"] - row["ci_low"]], [row["ci_high"] - row["mean"]]],
        fmt="o",
        color=colour,
        markersize=3.5,
        elinewidth=1.2,
        capsize=1.5,
        gid=f"ours:{build}",
    )
    if not np.isnan(row["in_sample_mean"]):
        ax.plot(
            [row["in_sample_mean"]],
            [y],
            marker="o",
            markerfacecolor="none",
            color=colour,
            markersize=3.5,
            linestyle="none",
            gid=f"in_sample:{build}",
        )
    if not np.isnan(row["chance"]):
        ax.plot(
            [row["chance"]],
            [y],
            marker="x",
            color="black",
            markersize=3.5,
            markeredgewidth=0.8,
            linestyle="none",
            zorder=3,
            gid=f"chance:{build}",
        )  # over a point that sits at chance
    ax.text(
        0.98,
        y - 0.22,
        row["verdict"],
        transform=ax.get_yaxis_transform(),
        fontsize="xx-small",
        color=colour,
        ha="right",
        va="bottom",
        bbox=BOX,
        gid=f"verdict:{build}",
    )

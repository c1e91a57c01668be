"""The scaling sweep: each claim's statistic against model parameters, one line per token budget."""

import math

import matplotlib.pyplot as plt
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from tying.claims.claims_over_training import tokens_label
from tying.claims.definitions import ALL_TOKENS, CLAIMS
from tying.errors import PipelineError
from tying.report.figures import style

NCOLS = 3
DODGE = 1.05  # budgets' points sit this factor apart along the log x axis, so equal sizes do not overlap
STEPS_COLOURS = ["#3b75af", "#d9a21b", "#d45d9b", "#4c9a5b", "#7f5fb0", "#8c6d4f"]


def plot_scaling(table, path):
    """One panel per claim of the scaling table (tying.claims.scaling.scaling_table rows): the mean against the tied
    model's parameters (log axis), one line per token budget (steps), the Student-t interval as a band,
    the chance level dotted in the budget's colour, the paper's value dashed black, the claim's threshold
    thin black; each size's embedding share on the top axis. Comparable-token rows (a token_set other than
    all analysed tokens) are a dash-dot line of open markers in the budget's colour, without a band.
    Writes a vector PDF; returns the figure."""
    if table.empty:
        raise PipelineError("no scaling rows to plot")
    claims = [c for c in CLAIMS if c in set(table["claim"])]
    budgets = sorted(table["steps"].unique())
    colours = dict(zip(budgets, STEPS_COLOURS * (1 + len(budgets) // len(STEPS_COLOURS))))
    n_rows = math.ceil(len(claims) / NCOLS)
    style.setup()
    fig, axes = plt.subplots(
        n_rows, NCOLS, figsize=(2 * style.COLUMN_WIDTH, 1.75 * n_rows + 0.5), layout="constrained", squeeze=False
    )
    panels = axes.ravel()
    for i, (ax, claim) in enumerate(zip(panels, claims)):
        _panel(ax, table[table["claim"] == claim], claim, colours, first_row=i < NCOLS)
    for ax in panels[len(claims) :]:
        ax.set_axis_off()
    tokens = table.groupby("steps")["tokens"].first()
    handles = [Line2D([], [], color=colours[s], marker="o", markersize=3) for s in budgets]
    labels = [f"{s:,} steps ({tokens_label(tokens[s])} tokens)" for s in budgets]
    handles += [
        Patch(color="0.5", alpha=0.25),
        Line2D([], [], color="0.4", linestyle=":", marker=".", markersize=3),
        Line2D([], [], color="black", linestyle="--", linewidth=0.8),
        Line2D([], [], color="black", linewidth=0.5),
    ]
    labels += ["95% interval (Student-t, seeds)", "chance (rows permuted)", "paper", "threshold"]
    subsets = sorted(set(table["token_set"]) - {ALL_TOKENS})
    handles += [
        Line2D([], [], color="0.4", linestyle="-.", marker="o", markersize=3, markerfacecolor="white") for _ in subsets
    ]
    labels += [f"tokens {name}" for name in subsets]
    fig.legend(
        handles,
        labels,
        loc="outside lower center",
        ncols=min(len(labels), 4),
        frameon=False,
        fontsize="x-small",
        handlelength=1.8,
        columnspacing=1.0,
    )
    style.save(fig, path)
    return fig


def _panel(ax, rows, claim, colours, first_row):
    budgets = list(colours)
    for (steps, _), line in rows[rows["token_set"] != ALL_TOKENS].groupby(["steps", "token_set"]):
        line = line.sort_values("params")
        x = line["params"] * DODGE ** (budgets.index(steps) - (len(budgets) - 1) / 2)
        ax.plot(
            x,
            line["mean"],
            color=colours[steps],
            linestyle="-.",
            marker="o",
            markersize=3,
            markerfacecolor="white",
            linewidth=0.9,
        )
    rows = rows[rows["token_set"] == ALL_TOKENS]
    for steps, line in rows.groupby("steps"):
        line = line.sort_values("params")
        colour = colours[steps]
        x = line["params"] * DODGE ** (budgets.index(steps) - (len(budgets) - 1) / 2)
        ax.plot(x, line["mean"], color=colour, marker="o", markersize=3, linewidth=1)
        ax.fill_between(x, line["ci_low"], line["ci_high"], color=colour, alpha=0.2, linewidth=0)
        if len(line) == 1:  # a band needs two sizes: one size's interval as an error bar
            ax.errorbar(
                x,
                line["mean"],
                [line["mean"] - line["ci_low"], line["ci_high"] - line["mean"]],
                color=colour,
                alpha=0.5,
                linewidth=2,
                capsize=0,
            )
        if line["chance"].notna().any():
            ax.plot(x, line["chance"], color=colour, linestyle=":", marker=".", markersize=3, linewidth=0.9, alpha=0.8)
    if not math.isnan(CLAIMS[claim].paper_value):
        ax.axhline(CLAIMS[claim].paper_value, color="black", linestyle="--", linewidth=0.8)
    ax.axhline(CLAIMS[claim].threshold, color="black", linewidth=0.5)
    ax.set_title(CLAIMS[claim].title, fontsize="x-small")
    ax.set_ylabel(CLAIMS[claim].unit, fontsize="x-small")
    ax.set_xscale("log")
    sizes = rows.drop_duplicates("params").sort_values("params")
    ax.set_xticks(sizes["params"], [tokens_label(p) for p in sizes["params"]])
    ax.set_xticks([], minor=True)
    ax.set_xlabel("parameters, tied model (log)", fontsize="x-small")
    ax.tick_params(labelsize="xx-small")
    top = ax.secondary_xaxis("top")
    top.set_xticks(sizes["params"], [f"{s:.0%}" for s in sizes["embedding_share"]])
    top.set_xticks([], minor=True)
    top.tick_params(labelsize="xx-small", pad=1)
    if first_row:
        top.set_xlabel("embedding share of parameters", fontsize="xx-small", labelpad=2)

"""C3 against the lens's budget: (a) C3 of the tying comparison per procedure (and batch) against lens steps, with
the null pairs' C3 thin behind and the paper's +1.01 bits; (b) the tying comparison's state-0 KL, tied and untied,
against the same steps, their floors as flat lines; (c) its gap at every state against the fraction of depth,
one line per procedure, batch and budget, beside the paper's per-state gaps. All numbers from the lens-budget
tables (tying.claims.lens_budget)."""

import math

import matplotlib.pyplot as plt

from tying import paper
from tying.errors import PipelineError
from tying.lens.procedures import NAMES
from tying.report.figures import style

PROCEDURE_COLOURS = {"tuned_lens": "#c0392b", "certified": "#2c3e50"}


def plot_lens_budget(table, by_state, path):
    """Draw the lens-budget table and its per-state gaps as a three-panel vector PDF, (a) and (b) above (log step
    axes; the logit lens, 0 steps, a horizontal dotted line), (c) below. Returns the (closed) figure."""
    if table.empty:
        raise PipelineError("no lens-budget rows to plot")
    names = list(dict.fromkeys(table["comparison"]))
    trained = table[table["steps"] > 0]
    logit = table[table["procedure"] == "logit"]
    style.setup()
    fig, axes = plt.subplot_mosaic(
        [["a", "b"], ["c", "c"]], figsize=(2 * style.COLUMN_WIDTH, 5.6), layout="constrained"
    )
    left, middle, right = axes["a"], axes["b"], axes["c"]
    for name in names[1:]:
        for (procedure, _), rows in trained[trained["comparison"] == name].groupby(
            ["procedure", "batch_size"], sort=False
        ):
            left.plot(
                rows["steps"],
                rows["c3_mean"],
                color=PROCEDURE_COLOURS.get(procedure, "grey"),
                lw=0.8,
                alpha=0.45,
                ls="--",
                marker=".",
                ms=3,
            )
    first = trained[trained["comparison"] == names[0]]
    lenses = list(first.groupby(["procedure", "batch_size"], sort=False))
    for i, ((procedure, _), rows) in enumerate(lenses):
        colour, style_ = PROCEDURE_COLOURS.get(procedure, "grey"), _line(lenses, i)
        left.fill_between(rows["steps"], rows["c3_ci_low"], rows["c3_ci_high"], color=colour, alpha=0.12, lw=0)
        left.plot(
            rows["steps"],
            rows["c3_mean"],
            color=colour,
            marker="o",
            ms=3,
            ls=style_,
            label=f"{_label(procedure, rows)} ({names[0]})",
        )
    for value in logit.loc[logit["comparison"] == names[0], "c3_mean"]:
        left.axhline(value, color="grey", ls=":", lw=1, label=f"logit lens ({names[0]}): {value:+.2f}")
    left.axhline(paper.CLAIMS["C3"][1], color="black", ls="-.", lw=1, label=f"paper: {paper.CLAIMS['C3'][1]:+.2f}")
    left.axhline(0, color="black", lw=0.6)
    for who, (steps, _) in paper.LENS_BUDGETS.items():
        left.axvline(steps, color="black", lw=0.6, alpha=0.4)
        left.text(
            steps,
            0.3,
            f" {who}",
            rotation=90,
            fontsize=5.5,
            alpha=0.7,
            va="bottom",
            transform=left.get_xaxis_transform(),
        )
    left.set(
        xscale="log",
        xlabel="lens steps (log)",
        ylabel="C3 (bits, tied minus untied)",
        title=f"(a) C3; dashed: the {len(names) - 1} null pairs",
    )
    left.legend(fontsize=5, loc="best")
    for i, ((procedure, _), rows) in enumerate(lenses):
        colour, style_ = PROCEDURE_COLOURS.get(procedure, "grey"), _line(lenses, i)
        middle.plot(
            rows["steps"],
            rows["a_state0_bits"],
            color=colour,
            marker="o",
            ms=3,
            ls=style_,
            label=f"{_label(procedure, rows)}: tied (o), untied (s)",
        )
        middle.plot(rows["steps"], rows["b_state0_bits"], color=colour, marker="s", ms=3, ls=style_, alpha=0.6)
    for role, column in (("tied", "a_state0_bits"), ("untied", "b_state0_bits")):
        for value in logit.loc[logit["comparison"] == names[0], column]:
            middle.axhline(value, color=style.PALETTE[role], ls=":", lw=1, label=f"logit lens, {role}: {value:.2f}")
    floors = first.iloc[0]
    for role, ab in (("tied", "a"), ("untied", "b")):
        middle.axhline(floors[f"{ab}_floor_bits"], color=style.PALETTE[role], lw=1, label=f"floor, {role}")
        readout = floors[f"{ab}_readout_floor_bits"]
        if not math.isnan(readout):
            middle.axhline(
                floors[f"{ab}_floor_bits"] + readout,
                color=style.PALETTE[role],
                lw=1,
                ls="--",
                label=f"floor + readout floor, {role}",
            )
    middle.set(
        xscale="log",
        xlabel="lens steps (log)",
        ylabel="held-out KL at state 0 (bits)",
        title="(b) the embedding state and its floors",
    )
    middle.legend(fontsize=5, loc="best")
    _by_state(right, by_state[by_state["comparison"] == names[0]], names[0])
    style.save(fig, path)
    return fig


def _by_state(ax, rows, name):
    """Panel (c): each lens's per-state gap against state / L, the longer budgets darker; the paper's per-state
    gaps against state / 16."""
    for (procedure, batch), lens_rows in rows[rows["steps"] > 0].groupby(["procedure", "batch_size"], sort=False):
        budgets = sorted(lens_rows["steps"].unique())
        for k, steps in enumerate(budgets):
            line = lens_rows[lens_rows["steps"] == steps]
            last = k == len(budgets) - 1
            label = f"{NAMES.get(procedure, procedure)}, {batch} windows, {steps} steps"
            ax.plot(
                line["fraction"],
                line["mean"],
                color=PROCEDURE_COLOURS.get(procedure, "grey"),
                alpha=0.25 + 0.75 * (k + 1) / len(budgets),
                lw=1.2 if last else 0.7,
                marker="." if last else None,
                label=label if last else None,
            )
    logit = rows[rows["procedure"] == "logit"]
    ax.plot(logit["fraction"], logit["mean"], color="grey", ls=":", lw=1, label="logit lens")
    fractions = [s / paper.FIG2_LAYERS for s in range(paper.FIG2_LAYERS + 1)]
    ax.plot(
        fractions,
        paper.FIG2_GAP,
        color="black",
        ls="-.",
        lw=1,
        marker="x",
        ms=3,
        label=f"paper, {paper.FIG2_LAYERS} layers",
    )
    ax.axhline(0, color="black", lw=0.6)
    ax.set(
        xlabel="state / layers (0: the embedding)",
        ylabel="gap at the state (bits, tied minus untied)",
        title=f"(c) the gap at every state ({name}); lighter lines: shorter budgets",
    )
    ax.legend(fontsize=5, loc="best")


def _line(lenses, i):
    """A line style per batch of a procedure: solid for its first, then dashed, dotted."""
    procedure = lenses[i][0][0]
    k = [p for (p, _), _ in lenses[: i + 1]].count(procedure) - 1
    return ("-", "--", ":", "-.")[k % 4]


def _label(procedure, rows):
    return f"{NAMES.get(procedure, procedure)}, {int(rows['tokens_per_step'].iloc[0]):,} tokens a step"

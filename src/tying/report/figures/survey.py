"""The survey figure: one point per comparison, held-out Input(U)->Tied (x) vs Output(U)->Tied (y).

Above the diagonal the tied matrix sits closer to the untied output matrix (the paper's claim);
controls are drawn with their own markers, chance levels as grey crosses. Released models cluster,
so each name sits in a column right of the axes, in its point's vertical order, joined to the point.
"""

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns

from tying.checkpoints.controls import CONTROLS
from tying.claims.survey import PAIR_KIND
from tying.errors import PipelineError
from tying.report.figures import style

# kind -> (marker, palette colour)
KINDS = {
    PAIR_KIND: ("o", "tied"),
    CONTROLS["input"]: ("X", "input"),
    CONTROLS["output"]: ("s", "output"),
    CONTROLS["mixture"]: ("D", "mixture"),
}
LABEL_GAP = 0.045  # axes fraction between names in the column (about one line of their 5-point font)


def plot_survey(table, path):
    """Scatter of survey.csv's in_tied (x) against out_tied (y), one named point per comparison run.

    table: survey_table's frame; rows without numbers (not run) are left out. Returns the (closed) figure.
    """
    run = table.dropna(subset=["in_tied", "out_tied"])
    if run.empty:
        raise PipelineError("survey table has no comparison with alignment numbers to plot")
    style.setup()
    fig, ax = plt.subplots(figsize=(style.COLUMN_WIDTH, style.COLUMN_WIDTH), layout="constrained")
    low = min(0.0, run[["in_tied", "out_tied", "in_tied_chance", "out_tied_chance"]].min().min()) - 0.05
    ax.plot([low, 1.02], [low, 1.02], color="0.5", linestyle="--", linewidth=0.8, zorder=0)
    ax.scatter(run["in_tied_chance"], run["out_tied_chance"], marker="+", color="0.6", s=20, label="chance (permuted)")
    kinds = [k for k in KINDS if k in set(run["kind"])]
    sns.scatterplot(
        run,
        x="in_tied",
        y="out_tied",
        hue="kind",
        style="kind",
        hue_order=kinds,
        style_order=kinds,
        markers={k: KINDS[k][0] for k in kinds},
        palette={k: style.PALETTE[KINDS[k][1]] for k in kinds},
        s=40,
        ax=ax,
    )
    ax.set(
        xlim=(low, 1.02),
        ylim=(low, 1.02),
        xlabel="Input(U) -> Tied (held-out cosine)",
        ylabel="Output(U) -> Tied (held-out cosine)",
        title="Released models, linear maps scored held out;\nabove the diagonal: Tied closer to Output(U)",
    )
    ax.title.set_fontsize("small")
    _name_points(ax, run)
    sns.move_legend(
        ax, "upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, title=None, frameon=False, fontsize="x-small"
    )
    style.save(fig, path)
    return fig


def _name_points(ax, run):
    """Each comparison's name right of the axes, at its point's height spread to LABEL_GAP apart, with a
    thin line to its point (the axes' limits must be set)."""
    points = run[["in_tied", "out_tied"]].to_numpy()
    heights = (ax.transData + ax.transAxes.inverted()).transform(points)[:, 1]
    order = np.argsort(heights, kind="stable")
    for i, y in zip(order, _spread(heights[order], min(LABEL_GAP, 1 / len(order)))):
        ax.annotate(
            run["comparison"].iloc[i],
            points[i],
            xytext=(1.03, y),
            textcoords="axes fraction",
            va="center",
            fontsize=5,
            color="0.3",
            arrowprops={"arrowstyle": "-", "color": "0.75", "linewidth": 0.4, "shrinkA": 0, "shrinkB": 3},
        )


def _spread(heights, gap):
    """Ascending `heights` moved as little as this pass can so that neighbours sit >= gap apart within [0, 1]."""
    out = np.array(heights, dtype=float)
    for i in range(1, len(out)):
        out[i] = max(out[i], out[i - 1] + gap)
    out[-1] = min(out[-1], 1.0)
    for i in range(len(out) - 2, -1, -1):
        out[i] = min(out[i], out[i + 1] - gap)
    return out

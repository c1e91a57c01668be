"""C3 by state against width: the gap at each state, one line a width, one panel a lens (tuned-lens's optimiser at
each budget, the certified lens); below, the embedding's share of the residual stream and the logit lens's gap."""

import matplotlib.pyplot as plt
import seaborn as sns
from matplotlib.lines import Line2D

from tying.errors import PipelineError
from tying.report.figures import style

SHARE = (("norm_ratio", r"$\|h_0\| \,/\, \|h_s\|$"), ("cosine", r"$\cos(h_s, h_0)$"))  # residual share columns


def plot_c3_by_width(table, path):
    """Draw the C3-by-width table (tying.claims.c3_by_width rows) as a vector PDF: top row, one panel a trained
    lens (every lens but the logit lens, in table order) of the gap's mean and interval against state, one line a
    width, on one scale; bottom row, each width's residual share (tied solid, untied dashed) and the logit lens's gap.
    Returns the (closed) figure."""
    if table.empty:
        raise PipelineError("no C3-by-width rows to plot")
    lenses = [lens for lens in dict.fromkeys(table["lens"]) if lens != "logit"]
    widths = sorted(table["hidden_size"].unique())
    colours = dict(zip(widths, sns.color_palette("viridis", len(widths))))
    columns = max(len(lenses), len(SHARE) + 1)
    style.setup()
    fig, axes = plt.subplots(2, columns, figsize=(2 * style.COLUMN_WIDTH, 4.2), layout="constrained", squeeze=False)
    for ax, lens in zip(axes[0], lenses):
        _gap_panel(ax, table[table["lens"] == lens], colours, f"gap, {lens}")
    for ax in axes[0][1 : len(lenses)]:
        ax.sharey(axes[0][0])  # the lenses' gaps on one scale
    axes[0][0].set_ylabel("tied − untied KL (bits)", fontsize="x-small")
    for ax, (key, label) in zip(axes[1], SHARE):
        _share_panel(ax, table[table["lens"] == "logit"], colours, key, label)
    _gap_panel(axes[1][len(SHARE)], table[table["lens"] == "logit"], colours, "gap, logit lens")
    for ax in [*axes[0][len(lenses) :], *axes[1][len(SHARE) + 1 :]]:
        ax.set_axis_off()
    handles = [Line2D([], [], color=colours[w], marker="o", markersize=2.5) for w in widths]
    handles += [Line2D([], [], color="0.3"), Line2D([], [], color="0.3", linestyle="--")]
    labels = [f"d = {w}" for w in widths] + ["tied", "untied"]
    fig.legend(handles, labels, loc="outside lower center", ncols=len(handles), frameon=False, fontsize="x-small")
    style.save(fig, path)
    return fig


def _gap_panel(ax, rows, colours, title):
    for width, own in rows.groupby("hidden_size"):
        own = own.sort_values("state")
        ax.errorbar(
            own["state"],
            own["mean"],
            [own["mean"] - own["ci_low"], own["ci_high"] - own["mean"]],
            color=colours[width],
            marker="o",
            markersize=2.5,
            linewidth=1,
            capsize=1.5,
        )
    ax.axhline(0, color="black", linewidth=0.5)
    _states_axis(ax, rows, title)


def _share_panel(ax, rows, colours, key, label):
    for width, own in rows.groupby("hidden_size"):
        own = own.sort_values("state")
        for role, dashes in (("tied", "-"), ("untied", "--")):
            ax.plot(
                own["state"],
                own[f"{role}_{key}"],
                color=colours[width],
                linestyle=dashes,
                marker="o",
                markersize=2.5,
                linewidth=1,
            )
    _states_axis(ax, rows, label)


def _states_axis(ax, rows, title):
    ax.set_xticks(sorted(rows["state"].unique()))
    ax.set_xlabel("state", fontsize="x-small")
    ax.set_title(title, fontsize="x-small", pad=2)
    ax.tick_params(labelsize="xx-small", pad=1)

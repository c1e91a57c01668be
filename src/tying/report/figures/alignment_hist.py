"""Figure 1: per-token linear-map cosines of Input(U)->Tied and Output(U)->Tied, over their chance level."""

import matplotlib.pyplot as plt
import seaborn as sns
from matplotlib.patches import Patch

from tying.errors import PipelineError
from tying.frames import at_step
from tying.report.figures import style
from tying.report.tables import alignment_means

CHANCE_COLOUR = "0.6"
SERIES = {"input_u->tied": ("Input(U) -> Tied", "input"), "output_u->tied": ("Output(U) -> Tied", "output")}


def plot_alignment_hist(alignment, path, pair="main", step=None, models=None):
    """Histograms of the in-sample linear-map cosines, pooled over seeds; dashed lines at Table 1's
    means; in grey behind them, the chance level (both comparisons with the target's rows permuted).

    alignment: tidy frame (pair, seed, step, comparison, map, scored, target, token_id, cosine);
    last step of `pair` unless `step` is given; models: a released pair's models ("tied vs untied"), which the
    title names in place of its step. Returns the (closed) figure.
    """
    rows = alignment[
        (alignment["pair"] == pair)
        & (alignment["map"] == "linear")
        & (alignment["scored"] == "in_sample")
        & alignment["comparison"].isin(list(SERIES))
    ]
    if rows.empty:
        raise PipelineError(f"no in-sample linear-map input_u->tied / output_u->tied cosines for pair {pair!r}")
    rows = at_step(rows, step)
    chance, rows = rows[rows["target"] == "permuted"], rows[rows["target"] == "true"]
    means = alignment_means(rows).set_index("comparison")["mean"]
    chance_mean = alignment_means(chance)["mean"].mean()  # Table 1's chance cells of both comparisons
    labels = {c: f"{name} (mean {means[c]:.3f})" for c, (name, _) in SERIES.items()}
    palette = {labels[c]: style.PALETTE[colour] for c, (_, colour) in SERIES.items()}

    style.setup()
    fig, ax = plt.subplots(figsize=(style.COLUMN_WIDTH, 0.7 * style.COLUMN_WIDTH), layout="constrained")
    sns.histplot(chance, x="cosine", stat="density", color=CHANCE_COLOUR, alpha=0.5, linewidth=0, bins=50, ax=ax)
    sns.histplot(
        rows.assign(series=rows["comparison"].map(labels)),
        x="cosine",
        hue="series",
        hue_order=list(palette),
        palette=palette,
        stat="density",
        common_norm=False,
        element="step",
        bins=50,
        legend=False,
        ax=ax,
    )
    for c, label in labels.items():
        ax.axvline(means[c], color=palette[label], linestyle="--", linewidth=1)
    ax.set_ylim(top=1.3 * ax.get_ylim()[1])  # room for the legend
    handles = [Patch(facecolor="none", edgecolor=colour, label=label) for label, colour in palette.items()]
    handles.append(Patch(color=CHANCE_COLOUR, alpha=0.5, label=f"chance: rows permuted (mean {chance_mean:.3f})"))
    ax.legend(handles=handles, loc="upper left", frameon=False, fontsize="small")
    n_seeds = rows["seed"].nunique()
    title = (
        f"{pair}, {models}: one pair of models"
        if models
        else f"{pair}, step {int(rows['step'].iloc[0])}: tokens pooled over {n_seeds} seed{'s' * (n_seeds > 1)}"
    )
    ax.set(xlabel="cosine similarity after linear map", ylabel="density (per comparison)", title=title)
    style.save(fig, path)
    return fig

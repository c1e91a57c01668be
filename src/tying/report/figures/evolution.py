"""Figures 3, 8, 9: how far an untied run's input and output matrices move during training."""

import matplotlib.pyplot as plt
import seaborn as sns

from tying.errors import PipelineError
from tying.report.figures import style

PANELS = {"drift": "drift: cos to step 0", "change": "change: cos to previous"}


def plot_evolution(evolution, path, run="main"):
    """Top: drift to step 0; bottom: change between checkpoints; input vs output over steps.

    evolution: tidy frame (run, seed, matrix, step, drift, change). Lines are the mean
    over seeds, the band their full range. Returns the (closed) figure.
    """
    rows = evolution[evolution["run"] == run]
    if rows.empty:
        raise PipelineError(f"no evolution rows for run {run!r}; runs: {sorted(evolution['run'].unique())}")
    palette = {m: style.PALETTE[m] for m in ("input", "output")}

    style.setup()
    fig, axes = plt.subplots(
        2, 1, sharex=True, figsize=(style.COLUMN_WIDTH, 1.0 * style.COLUMN_WIDTH), layout="constrained"
    )
    for ax, (column, label) in zip(axes, PANELS.items()):
        sns.lineplot(
            rows.dropna(subset=[column]),
            x="step",
            y=column,
            hue="matrix",
            hue_order=list(palette),
            palette=palette,
            errorbar=("pi", 100),
            marker="o",
            markersize=3,
            ax=ax,
        )
        ax.set(ylabel=label)
        ax.get_legend().set_title(None)
    axes[1].get_legend().remove()
    n_seeds = rows["seed"].nunique()
    axes[0].set_title(
        f"untied run of {run}; mean cosine over tokens;\n"
        f"line = mean of {n_seeds} seed{'s' * (n_seeds > 1)}, band = their range",
        fontsize="small",
    )
    axes[1].set(xlabel="training step")
    style.save(fig, path)
    return fig

"""Figure 5: row norm against how often the run drew each token, for untied input, untied output and tied matrices."""

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns

from tying.errors import PipelineError
from tying.metrics.norm_frequency import FREQUENCY, MAX_SPAN, MIN_BIN_TOKENS, binned_norms
from tying.report.figures import style

PANELS = {
    "untied_input": ("untied input", "input"),
    "untied_output": ("untied output", "output"),
    "tied": ("tied", "tied"),
}


def plot_norm_frequency(norm_freq, path, pair="main", seed=None, bins_per_decade=4):
    """Three panels of row L2 norm vs log10 draws (the analysed tokens), with the binned means C6 is judged on
    (each bin's token count beside it) now and at step 0, and draws per million positions on the top axis.

    norm_freq: tidy frame (pair, seed, matrix, token_id, drawn, per_million, norm, initial_norm); one seed
    (default the first). Returns the (closed) figure.
    """
    runs = norm_freq[(norm_freq["pair"] == pair) & (norm_freq[FREQUENCY] >= 1)]
    if runs.empty:
        raise PipelineError(f"no norm_freq rows with {FREQUENCY} >= 1 for pair {pair!r}")
    seed = runs["seed"].min() if seed is None else seed
    rows = runs[runs["seed"] == seed]
    rows = rows.assign(log_count=np.log10(rows[FREQUENCY]))
    binned = binned_norms(rows, bins_per_decade)
    per_draw = float((rows["per_million"] / rows[FREQUENCY]).median())  # per million positions, one draw

    style.setup()
    fig, axes = plt.subplots(
        1, 3, sharex=True, figsize=(style.COLUMN_WIDTH, 0.6 * style.COLUMN_WIDTH), layout="constrained"
    )
    for ax, (matrix, (title, colour)) in zip(axes, PANELS.items()):
        panel = rows[rows["matrix"] == matrix]
        sns.scatterplot(
            panel,
            x="log_count",
            y="norm",
            color=style.PALETTE[colour],
            s=2,
            alpha=0.15,
            linewidth=0,
            rasterized=True,
            ax=ax,
        )
        line = binned[binned["matrix"] == matrix]
        sns.lineplot(line, x="log_count", y="norm", color="black", linewidth=1, marker="o", markersize=2, ax=ax)
        if line["initial_norm"].notna().any():
            ax.plot(line["log_count"], line["initial_norm"], color="grey", linewidth=0.8, linestyle="--")
        for x, y, n in zip(line["log_count"], line["norm"], line["tokens"]):
            ax.annotate(f"{n}", (x, y), textcoords="offset points", xytext=(0, 3), ha="center", fontsize=4)
        ax.set(title=title, xlabel="", ylabel="")
        ax.title.set_fontsize("small")
        if np.isfinite(per_draw):
            top = ax.secondary_xaxis(
                "top", functions=(lambda x: x + np.log10(per_draw), lambda x: x - np.log10(per_draw))
            )
            top.tick_params(labelsize="x-small")
    axes[0].set(ylabel="row L2 norm")
    fig.supxlabel("log10 draws by the run (top: log10 draws per million training positions)", fontsize="small")
    fig.suptitle(
        f"{pair}, seed {seed}; line: mean norm per 1/{bins_per_decade} decade of draws, numbers: tokens a "
        f"bin\n(bins of < {MIN_BIN_TOKENS} tokens merged within {MAX_SPAN}/{bins_per_decade} decade); dashed: "
        "at step 0",
        fontsize="x-small",
    )
    style.save(fig, path)
    return fig

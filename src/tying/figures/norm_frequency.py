"""Figure 5: row norm against token frequency for untied input, untied output and tied matrices."""
import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns

from tying.errors import PipelineError
from tying.figures import style
from tying.norm_frequency import MIN_BIN_TOKENS, binned_norms

PANELS = {"untied_input": ("untied input", "input"), "untied_output": ("untied output", "output"),
          "tied": ("tied", "tied")}


def plot_norm_frequency(norm_freq, path, pair="main", seed=None, bins_per_decade=4):
    """Three panels of row L2 norm vs log10 count (the analysed tokens), with binned means now and at step 0.

    norm_freq: tidy frame (pair, seed, matrix, token_id, count, norm, initial_norm); one seed (default
    the first). Returns the (closed) figure.
    """
    runs = norm_freq[(norm_freq["pair"] == pair) & (norm_freq["count"] >= 1)]
    if runs.empty:
        raise PipelineError(f"no norm_freq rows with count >= 1 for pair {pair!r}")
    seed = runs["seed"].min() if seed is None else seed
    rows = runs[runs["seed"] == seed]
    rows = rows.assign(log_count=np.log10(rows["count"]))
    binned = binned_norms(rows, bins_per_decade)

    style.setup()
    fig, axes = plt.subplots(1, 3, sharex=True, figsize=(style.COLUMN_WIDTH, 0.6 * style.COLUMN_WIDTH),
                             layout="constrained")
    for ax, (matrix, (title, colour)) in zip(axes, PANELS.items()):
        panel = rows[rows["matrix"] == matrix]
        sns.scatterplot(panel, x="log_count", y="norm", color=style.PALETTE[colour], s=2, alpha=0.15,
                        linewidth=0, rasterized=True, ax=ax)
        line = binned[binned["matrix"] == matrix]
        sns.lineplot(line, x="log_count", y="norm", color="black", linewidth=1, marker="o", markersize=2, ax=ax)
        if line["initial_norm"].notna().any():
            ax.plot(line["log_count"], line["initial_norm"], color="grey", linewidth=0.8, linestyle="--")
        ax.set(title=title, xlabel="", ylabel="")
        ax.title.set_fontsize("small")
    axes[0].set(ylabel="row L2 norm")
    fig.supxlabel("log10 token count (corpus occurrences)", fontsize="small")
    fig.suptitle(f"{pair}, seed {seed}; line = mean norm per 1/{bins_per_decade} decade (bins of < {MIN_BIN_TOKENS} "
                 "tokens merged), dashed = at step 0", fontsize="small")
    style.save(fig, path)
    return fig

"""Figure 4: the lookup-path and projection-path gradients of the tied matrix."""

import matplotlib.pyplot as plt
import seaborn as sns
from matplotlib.ticker import MaxNLocator

from tying.errors import PipelineError
from tying.report.figures import style

PROXY_LABEL = "output share by the\npaper code's proxy (shares)"
PATHS = {
    "input": ("g_in", "g_in_roll", "in_share", "input (lookup)"),
    "output": ("g_out", "g_out_roll", "out_share", "output (projection)"),
}


def plot_grad_flow(grad_flow, path, pair="main", variant="tied", seed=None):
    """Left: gradient norms on a log scale (raw faint, rolling mean solid); right: shares, stacked, %,
    with the output share as the paper's code measured it (input side = ||dL/d embedding output||) dashed.

    grad_flow: tidy frame (pair, seed, variant, step, g_in, g_out, g_in_roll, g_out_roll,
    in_share, out_share, proxy_out_share); one seed (default the first). Returns the (closed) figure.
    """
    runs = grad_flow[(grad_flow["pair"] == pair) & (grad_flow["variant"] == variant)]
    if runs.empty:
        raise PipelineError(f"no grad_flow rows for pair {pair!r}, variant {variant!r}")
    seed = runs["seed"].min() if seed is None else seed
    rows = runs[runs["seed"] == seed].sort_values("step")
    if rows.empty:
        raise PipelineError(f"no grad_flow rows for seed {seed}; seeds: {sorted(runs['seed'].unique())}")

    style.setup()
    fig, (left, right) = plt.subplots(
        1, 2, figsize=(style.COLUMN_WIDTH, 0.65 * style.COLUMN_WIDTH), layout="constrained"
    )
    for colour, (raw, roll, _, label) in PATHS.items():
        sns.lineplot(rows, x="step", y=raw, color=style.PALETTE[colour], alpha=0.25, linewidth=0.5, ax=left)
        sns.lineplot(rows, x="step", y=roll, color=style.PALETTE[colour], linewidth=1.2, label=label, ax=left)
    left.set(yscale="log", xlabel="training step", ylabel="gradient norm (Frobenius)", title="norms")
    right.stackplot(
        rows["step"],
        *(100 * rows[share] for _, _, share, _ in PATHS.values()),
        colors=[style.PALETTE[c] for c in PATHS],
        labels=[label for *_, label in PATHS.values()],
        alpha=0.85,
        linewidth=0,
    )
    proxy = right.plot(rows["step"], 100 * (1 - rows["proxy_out_share"]), color="black", linestyle="--", linewidth=0.8)[
        0
    ]
    handles, labels = left.get_legend_handles_labels()
    left.get_legend().remove()
    fig.legend(
        [*handles, proxy],
        [*labels, PROXY_LABEL],
        frameon=False,
        fontsize="x-small",
        loc="outside lower center",
        ncols=3,
    )
    right.set(
        xlabel="training step",
        ylabel="share of norm sum (%)",
        ylim=(0, 100),
        title="shares",
        xlim=(rows["step"].min(), rows["step"].max()),
    )
    right.xaxis.set_major_locator(MaxNLocator(nbins=2))
    fig.suptitle(f"{pair}, {variant}, seed {seed}", fontsize="small")
    style.save(fig, path)
    return fig

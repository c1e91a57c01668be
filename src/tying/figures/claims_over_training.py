"""Claims over training: each claim's statistic at every checkpoint, one small panel per statistic."""
import math

import matplotlib.pyplot as plt
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from tying.claims import CLAIMS
from tying.errors import PipelineError
from tying.figures import style

PANELS = {  # claim -> (panel title, y label)
    "C1": ("C1: Out(U)→T − In(U)→T", "Δ mean cosine"),
    "C2": ("C2: KNN@k Out − In", "Δ overlap (share)"),
    "C4": ("C4: drift In − Out, untied", "Δ cosine to step 0"),
    "C7a": ("C7a: x5 − tied, to In(U)", "Δ cosine"),
    "C7b": ("C7b: x5 − tied, to Out(U)", "Δ cosine"),
}
NCOLS = 2


def plot_claims_over_training(table, path, released=()):
    """Panels of each pair's claims (claims_over_training rows: pair, claim, step, tokens, mean, ci_low,
    ci_high, chance_mean, paper_value): the mean as a line, its interval as a band, the chance level in
    grey, the paper's final value dashed, the claim's threshold thin black. Trained pairs against training
    step (tokens seen on the top axis); `released` pairs against tokens seen, log axis. Returns the figure."""
    if table.empty:
        raise PipelineError("no claims-over-training rows to plot")
    pairs = list(dict.fromkeys(table["pair"]))
    claims = {p: [c for c in CLAIMS if c in set(table.loc[table["pair"] == p, "claim"])] for p in pairs}
    rows = [math.ceil(len(claims[p]) / NCOLS) for p in pairs]
    style.setup()
    fig, axes = plt.subplots(sum(rows), NCOLS, figsize=(style.COLUMN_WIDTH, 1.3 * sum(rows) + 0.4),
                             layout="constrained", squeeze=False)
    first_row = 0
    for pair, n_rows in zip(pairs, rows):
        panels = axes[first_row:first_row + n_rows].ravel()
        for ax, claim in zip(panels, claims[pair]):
            _panel(ax, table[(table["pair"] == pair) & (table["claim"] == claim)].sort_values("tokens"), pair,
                   claim, pair in released)
        for ax in panels[len(claims[pair]):]:
            ax.set_axis_off()
        first_row += n_rows
    handles = [Line2D([], [], color=style.PALETTE["tied"], marker="o", markersize=2.5),
               Patch(color=style.PALETTE["tied"], alpha=0.3), Line2D([], [], color="0.55", linestyle=":"),
               Line2D([], [], color="black", linestyle="--", linewidth=0.8),
               Line2D([], [], color="black", linewidth=0.5)]
    fig.legend(handles, ["mean", "95% interval", "chance", "paper (final)", "threshold"], loc="outside lower center",
               ncols=5, frameon=False, fontsize="x-small", handlelength=1.5, columnspacing=0.8)
    style.save(fig, path)
    return fig


def _panel(ax, rows, pair, claim, released):
    x = rows["tokens"] / 1e9 if released else rows["step"].astype(float)
    colour = style.PALETTE["tied"]
    ax.plot(x, rows["mean"], color=colour, marker="o", markersize=2.5, linewidth=1)
    ax.fill_between(x, rows["ci_low"], rows["ci_high"], color=colour, alpha=0.3, linewidth=0)
    if rows["chance_mean"].notna().any():
        ax.plot(x, rows["chance_mean"], color="0.55", linestyle=":", linewidth=1)
    if not math.isnan(CLAIMS[claim].paper_value):
        ax.axhline(CLAIMS[claim].paper_value, color="black", linestyle="--", linewidth=0.8)
    ax.axhline(CLAIMS[claim].threshold, color="black", linewidth=0.5)
    title, ylabel = PANELS[claim]
    ax.set_title(f"{pair} · {title}", fontsize="x-small")
    ax.set_ylabel(ylabel, fontsize="x-small")
    ax.tick_params(labelsize="xx-small")
    if released:
        ax.set_xscale("log")
        ax.set_xlabel("tokens seen (billions, log)", fontsize="x-small")
        return
    ax.set_xlabel("training step", fontsize="x-small")
    per_step = (rows["tokens"] / rows["step"]).dropna().iloc[-1] / 1e6  # tokens per step, millions
    top = ax.secondary_xaxis("top", functions=(lambda s: s * per_step, lambda t: t / per_step))
    top.set_xlabel("tokens seen (millions)", fontsize="xx-small")
    top.tick_params(labelsize="xx-small")

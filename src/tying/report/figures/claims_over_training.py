"""Claims over training: each claim's statistic at every checkpoint, one small panel per statistic, after a
panel of the trained pairs' validation loss against the count tables of the tokens drawn by then."""

import math

import matplotlib.pyplot as plt
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from tying.claims.definitions import CLAIMS
from tying.errors import PipelineError
from tying.report.figures import style

DRAWN = ("C1", "C2", "C4", "C7a", "C7b")  # a pair's claim panels, in order (titles and units: CLAIMS)
NCOLS = 2


def plot_claims_over_training(table, path, released=(), quality=None):
    """Panels of each pair's claims (claims_over_training rows: pair, claim, step, tokens, mean, ci_low,
    ci_high, chance_mean, paper_value): the mean as a line, its interval as a band, the chance level in
    grey, the paper's final value dashed, the claim's threshold thin black. Trained pairs against training
    step (tokens seen on the top axis); `released` pairs against tokens seen, log axis. `quality`: the
    trained pairs' model-quality rows (tying.metrics.model_quality), drawn first as each pair's loss panel.
    Returns the figure."""
    if table.empty:
        raise PipelineError("no claims-over-training rows to plot")
    pairs = list(dict.fromkeys(table["pair"]))
    with_loss = set() if quality is None else set(quality["pair"])
    claims = {
        p: ["loss"] * (p in with_loss) + [c for c in DRAWN if c in set(table.loc[table["pair"] == p, "claim"])]
        for p in pairs
    }
    rows = [math.ceil(len(claims[p]) / NCOLS) for p in pairs]
    style.setup()
    fig, axes = plt.subplots(
        sum(rows), NCOLS, figsize=(style.COLUMN_WIDTH, 1.3 * sum(rows) + 0.4), layout="constrained", squeeze=False
    )
    first_row = 0
    for pair, n_rows in zip(pairs, rows):
        panels = axes[first_row : first_row + n_rows].ravel()
        for ax, claim in zip(panels, claims[pair]):
            if claim == "loss":
                _loss_panel(ax, quality[quality["pair"] == pair], pair)
                continue
            _panel(
                ax,
                table[(table["pair"] == pair) & (table["claim"] == claim)].sort_values("tokens"),
                pair,
                claim,
                pair in released,
            )
        for ax in panels[len(claims[pair]) :]:
            ax.set_axis_off()
        first_row += n_rows
    handles = {
        "mean": Line2D([], [], color=style.PALETTE["tied"], marker="o", markersize=2.5),
        "95% interval": Patch(color=style.PALETTE["tied"], alpha=0.3),
        "chance": Line2D([], [], color="0.55", linestyle=":"),
        "paper (final)": Line2D([], [], color="black", linestyle="--", linewidth=0.8),
        "threshold": Line2D([], [], color="black", linewidth=0.5),
    }
    if with_loss:
        roles = dict.fromkeys(quality["role"])
        handles |= {
            f"{role} loss": Line2D([], [], color=_role_colour(role), marker="o", markersize=2.5) for role in roles
        }
        handles |= {
            "bigram table": Line2D([], [], color="black", linestyle=(0, (4, 1.5)), linewidth=0.8),
            "unigram table": Line2D([], [], color="0.55", linestyle="-.", linewidth=0.8),
        }
    fig.legend(
        list(handles.values()),
        list(handles),
        loc="outside lower center",
        ncols=5,
        frameon=False,
        fontsize="x-small",
        handlelength=1.5,
        columnspacing=0.8,
    )
    style.save(fig, path)
    return fig


def _loss_panel(ax, quality, pair):
    """Each model's mean validation loss over seeds, and the bigram and unigram tables', against step."""
    means = quality.groupby(["role", "step"], sort=False)[["val_loss", "bigram_loss", "unigram_loss"]].mean()
    for role, rows in means.groupby(level="role", sort=False):
        ax.plot(
            rows.index.get_level_values("step"),
            rows["val_loss"],
            color=_role_colour(role),
            marker="o",
            markersize=2.5,
            linewidth=1,
        )
    tables = means.groupby(level="step")[["bigram_loss", "unigram_loss"]].mean()
    ax.plot(tables.index, tables["bigram_loss"], color="black", linestyle=(0, (4, 1.5)), linewidth=0.8)
    ax.plot(tables.index, tables["unigram_loss"], color="0.55", linestyle="-.", linewidth=0.8)
    ax.set_title(f"{pair} · validation loss, count tables", fontsize="x-small")
    ax.set_ylabel("nats per token", fontsize="x-small")
    ax.set_xlabel("training step", fontsize="x-small")
    ax.tick_params(labelsize="xx-small")


def _role_colour(role):
    return style.PALETTE.get(role, style.PALETTE["scaled"])


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
    ax.set_title(f"{pair} · {CLAIMS[claim].title}", fontsize="x-small")
    ax.set_ylabel(CLAIMS[claim].unit, fontsize="x-small")
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

"""The survey figure: one point per comparison, held-out Input(U)->Tied (x) vs Output(U)->Tied (y).

Above the diagonal the tied matrix sits closer to the untied output matrix (the paper's claim);
controls are drawn with their own markers, chance levels as grey crosses.
"""
import matplotlib.pyplot as plt
import seaborn as sns

from tying.errors import PipelineError
from tying.figures import style
from tying.survey import CONTROLS, PAIR_KIND

# kind -> (marker, palette colour)
KINDS = {PAIR_KIND: ("o", "tied"), CONTROLS["input"]: ("X", "input"), CONTROLS["output"]: ("s", "output")}


def plot_survey(table, path):
    """Scatter of survey.csv's in_tied (x) against out_tied (y), one labelled point per comparison run.

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
    sns.scatterplot(run, x="in_tied", y="out_tied", hue="kind", style="kind", hue_order=list(KINDS),
                    style_order=list(KINDS), markers={k: m for k, (m, _) in KINDS.items()},
                    palette={k: style.PALETTE[colour] for k, (_, colour) in KINDS.items()}, s=40, ax=ax)
    for row in run.itertuples():
        ax.annotate(row.comparison, (row.in_tied, row.out_tied), xytext=(3, 2), textcoords="offset points",
                    fontsize=5, color="0.3")
    ax.set(xlim=(low, 1.02), ylim=(low, 1.02), xlabel="Input(U) -> Tied (held-out linear-map cosine)",
           ylabel="Output(U) -> Tied (held-out linear-map cosine)", title="Released models: above the diagonal = "
           "closer to the output space")
    ax.title.set_fontsize("small")
    sns.move_legend(ax, "upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, title=None, frameon=False,
                    fontsize="x-small")
    style.save(fig, path)
    return fig

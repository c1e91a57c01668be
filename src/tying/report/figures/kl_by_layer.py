"""Figure 2: tuned-lens KL (bits) by layer, tied vs untied; logit lens as a faint baseline."""

import matplotlib.pyplot as plt
import seaborn as sns
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from tying.report.figures import style

ROLES = ["tied", "untied"]
LENS_STYLE = {"tuned": {"alpha": 1.0, "linestyle": "-"}, "logit": {"alpha": 0.35, "linestyle": "--"}}


def plot_kl_by_layer(df, path, title=None):
    """Plot KL by layer from a tidy frame (pair, role, seed, layer, lens, kl_bits); one panel per pair.

    Seeds form the band (95% bootstrap CI) around the tuned-lens mean; the logit lens is
    drawn faint and dashed without a band. Writes a one-column vector PDF.
    """
    style.setup()
    pairs = sorted(df["pair"].unique())
    fig, axes = plt.subplots(len(pairs), 1, figsize=(style.COLUMN_WIDTH, 2.4 * len(pairs)), squeeze=False)
    palette = {role: style.PALETTE[role] for role in ROLES}
    for ax, pair in zip(axes[:, 0], pairs):
        for lens, line in LENS_STYLE.items():
            sns.lineplot(
                data=df[(df["pair"] == pair) & (df["lens"] == lens)],
                x="layer",
                y="kl_bits",
                hue="role",
                hue_order=ROLES,
                palette=palette,
                errorbar=("ci", 95) if lens == "tuned" else None,
                seed=0,
                legend=False,
                ax=ax,
                **line,
            )
        ax.set(xlabel="layer (0 = embeddings)", ylabel="KL divergence (bits)", title=pair if len(pairs) > 1 else title)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    handles = [Line2D([], [], color=palette[role], label=role) for role in ROLES]
    handles += [Line2D([], [], color="0.3", label=f"{lens} lens", **line) for lens, line in LENS_STYLE.items()]
    axes[0, 0].legend(handles=handles, fontsize="small", ncols=2)
    if title and len(pairs) > 1:
        fig.suptitle(title)
    style.save(fig, path)

"""The one palette and page style every figure uses (input blue, output gold, tied pink)."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import seaborn as sns  # noqa: E402

from tying.io import atomic_path  # noqa: E402

PALETTE = {
    "input": "#3b75af",
    "output": "#d9a21b",
    "tied": "#d45d9b",
    "untied": "#3b75af",
    "mixture": "#6a9f58",
    "scaled": "#7b2d5a",
}  # scaled: an input-scaled tied variant
COLUMN_WIDTH = 3.4  # inches: one column of a two-column paper


def setup():
    """Apply the shared seaborn theme; call once before plotting."""
    sns.set_theme(context="paper", style="whitegrid", font_scale=0.9)
    plt.rcParams.update({"pdf.fonttype": 42, "savefig.bbox": "tight"})


def save(fig, path):
    """Save `fig` as a vector PDF (atomically: whole or not at all) and close it."""
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="pdf")
    plt.close(fig)

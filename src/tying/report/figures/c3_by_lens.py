"""C3 against the lens's budget: (a) C3 of the tying comparison per procedure against lens steps, with the null
pairs' C3 thin behind and the paper's +1.01 bits; (b) the tying comparison's state-0 KL, tied and untied, against
the same steps, their floors as flat lines. All numbers from the C3-by-lens table (tying.claims.lens_budget)."""
import matplotlib.pyplot as plt

from tying import paper
from tying.errors import PipelineError
from tying.report.figures import style

PROCEDURE_COLOURS = {"tuned_lens": "#c0392b", "certified": "#2c3e50"}
PROCEDURE_NAMES = {"tuned_lens": "tuned-lens 0.2 recipe", "certified": "our certified recipe", "logit": "logit lens"}


def plot_c3_by_lens(table, path):
    """Draw the C3-by-lens table as a two-panel vector PDF (log step axes; the logit lens, 0 steps, drawn at the
    left edge as a horizontal dotted line). Returns the (closed) figure."""
    if table.empty:
        raise PipelineError("no C3-by-lens rows to plot")
    names = list(dict.fromkeys(table["comparison"]))
    trained = table[table["steps"] > 0]
    logit = table[table["procedure"] == "logit"]
    style.setup()
    fig, (left, right) = plt.subplots(1, 2, figsize=(2 * style.COLUMN_WIDTH, 2.9), layout="constrained")
    for name in names[1:]:
        for procedure, rows in trained[trained["comparison"] == name].groupby("procedure", sort=False):
            left.plot(rows["steps"], rows["c3_mean"], color=PROCEDURE_COLOURS.get(procedure, "grey"), lw=0.8,
                      alpha=0.45, ls="--", marker=".", ms=3)
    first = trained[trained["comparison"] == names[0]]
    for procedure, rows in first.groupby("procedure", sort=False):
        colour = PROCEDURE_COLOURS.get(procedure, "grey")
        left.fill_between(rows["steps"], rows["c3_ci_low"], rows["c3_ci_high"], color=colour, alpha=0.18, lw=0)
        left.plot(rows["steps"], rows["c3_mean"], color=colour, marker="o", ms=3.5,
                  label=f"{PROCEDURE_NAMES.get(procedure, procedure)} ({names[0]})")
    for value in logit.loc[logit["comparison"] == names[0], "c3_mean"]:
        left.axhline(value, color="grey", ls=":", lw=1, label=f"logit lens ({names[0]}): {value:+.2f}")
    left.axhline(paper.CLAIMS["C3"][1], color="black", ls="-.", lw=1, label=f"paper: {paper.CLAIMS['C3'][1]:+.2f}")
    left.axhline(0, color="black", lw=0.6)
    for who, (steps, _) in paper.LENS_BUDGETS.items():
        left.axvline(steps, color="black", lw=0.6, alpha=0.4)
        left.text(steps, 0.3, f" {who}", rotation=90, fontsize=5.5, alpha=0.7, va="bottom",
                  transform=left.get_xaxis_transform())
    left.set(xscale="log", xlabel="lens steps (log)", ylabel="C3 (bits, tied minus untied)",
             title=f"(a) C3; dashed: null pairs ({', '.join(names[1:]) or 'none'})")
    left.legend(fontsize=6, loc="upper right")
    for procedure, rows in first.groupby("procedure", sort=False):
        colour = PROCEDURE_COLOURS.get(procedure, "grey")
        right.plot(rows["steps"], rows["a_state0_bits"], color=colour, marker="o", ms=3,
                   label=f"{PROCEDURE_NAMES.get(procedure, procedure)}: tied")
        right.plot(rows["steps"], rows["b_state0_bits"], color=colour, marker="s", ms=3, ls="--", label="... untied")
    for role, column in (("tied", "a_state0_bits"), ("untied", "b_state0_bits")):
        for value in logit.loc[logit["comparison"] == names[0], column]:
            right.axhline(value, color=style.PALETTE[role], ls=":", lw=1, label=f"logit lens, {role}: {value:.2f}")
    floors = first.iloc[0]
    right.axhline(floors["a_floor_bits"], color=style.PALETTE["tied"], lw=1, label="floor, tied")
    right.axhline(floors["b_floor_bits"], color=style.PALETTE["untied"], lw=1, label="floor, untied")
    right.set(xscale="log", xlabel="lens steps (log)", ylabel="held-out KL at state 0 (bits)",
              title="(b) the embedding state and its floor")
    right.legend(fontsize=6, loc="upper right")
    style.save(fig, path)
    return fig

"""C3 against depth (scaling.c3_by_depth): each lens cell's tuned-lens KL gap, tied minus untied, over the early
half of its states as the claims table gives it, and at every state.

Input: the scaling table (tying.claims.scaling.scaling_table: each cell's C3 and LM rows of all analysed
tokens) and the lens cells' tuned-lens metric (pair = the cell, role, seed, layer, lens, kl_bits). Output, per
cell from shallow to deep: one "early half" row (states 0 .. ceil(L/2) - 1; the claims table's C3 with its
interval over seeds and validation windows, its verdict, and the LM row's margin; the tied and untied KL are
the seeds' means of tying.claims.statistics.early_layer_gap, whose gap is that C3), then one row per state
0 .. L: the gap taken per seed (a seed's tied and untied runs share data order), its mean and Student-t
interval over seeds, beside Figure 2's gap at the same state index (paper_same_state_bits) and at the same
fraction of depth (paper_same_fraction_bits, tying.paper.fig2_gap_at). `fraction` = state / L puts models of any
depth, the paper's 16 layers among them, on one axis; state L is the model's own output, 0 bits for both.
"""

import math

import pandas as pd

from tying import paper
from tying.claims.definitions import ALL_TOKENS
from tying.claims.statistics import early_layer_gap
from tying.errors import PipelineError
from tying.frames import markdown, only, write_table
from tying.stats import format_cell, mean_ci

EARLY, STATE = "early half", "state"
COLUMNS = [
    "cell",
    "layers",
    "steps",
    "scope",
    "states",
    "state",
    "fraction",
    "tied_bits",
    "untied_bits",
    "ours",
    "mean",
    "ci_low",
    "ci_high",
    "n_seeds",
    "verdict",
    "lm_nats",
    "paper_same_state_bits",
    "paper_same_fraction_bits",
]
EARLY_SHOWN = ["cell", "layers", "steps", "states", "tied_bits", "untied_bits", "ours", "n_seeds", "verdict", "lm_nats"]
STATE_SHOWN = [
    "cell",
    "layers",
    "states",
    "fraction",
    "tied_bits",
    "untied_bits",
    "ours",
    "n_seeds",
    "paper_same_state_bits",
    "paper_same_fraction_bits",
]
SAME = 1e-9  # bits: the lens metric's early-half gap and the claims table's C3 are one number


def c3_by_depth(scaling, lens):
    """The C3-by-depth table (COLUMNS) from the scaling table and the lens cells' tuned-lens metric frame."""
    c3 = _claim_rows(scaling, "C3")
    if c3.empty:
        raise PipelineError("C3 by depth: the scaling table has no C3 row (no cell has the lens)")
    if c3["layers"].duplicated().any():
        raise PipelineError(f"C3 by depth: cells {', '.join(c3['cell'])} do not each have their own depth")
    lm = _claim_rows(scaling, "LM").set_index("cell")["mean"]
    tuned = lens[lens["lens"] == "tuned"]
    frames = [
        _cell_rows(row, only(tuned, pair=row.cell), lm.get(row.cell, math.nan))
        for row in c3.sort_values("layers").itertuples()
    ]
    return pd.concat(frames, ignore_index=True)[COLUMNS]


def _claim_rows(scaling, claim):
    return scaling[(scaling["claim"] == claim) & (scaling["token_set"] == ALL_TOKENS)]


def _cell_rows(c3, lens, lm):
    """One cell's early-half row and its per-state rows."""
    layers = int(c3.layers)
    if lens["layer"].max() != layers:
        raise PipelineError(
            f"C3 by depth: cell {c3.cell}'s lens metric ends at state {lens['layer'].max()}, "
            f"not at its {layers} layers"
        )
    early = early_layer_gap(lens)
    if abs(early["gap_bits"].mean() - c3.mean) > SAME:
        raise PipelineError(
            f"C3 by depth: cell {c3.cell}'s lens metric gives C3 {early['gap_bits'].mean():.6f} bits, "
            f"its claims table {c3.mean:.6f}; the two files are of different builds"
        )
    cell = {"cell": c3.cell, "layers": layers, "steps": c3.steps}
    last_early = math.ceil(layers / 2) - 1
    rows = [
        cell
        | {
            "scope": EARLY,
            "states": f"0-{last_early}" if last_early else "0",
            "state": math.nan,
            "fraction": math.nan,
            "tied_bits": early["tied_bits"].mean(),
            "untied_bits": early["untied_bits"].mean(),
            "mean": c3.mean,
            "ci_low": c3.ci_low,
            "ci_high": c3.ci_high,
            "n_seeds": c3.n_seeds,
            "verdict": c3.verdict,
            "lm_nats": lm,
        }
    ]
    wide = lens.pivot_table(index=["layer", "seed"], columns="role", values="kl_bits")
    for state, by_seed in wide.groupby(level="layer"):
        mean, low, high = mean_ci(by_seed["tied"] - by_seed["untied"])
        rows.append(
            cell
            | {
                "scope": STATE,
                "states": str(state),
                "state": state,
                "fraction": state / layers,
                "tied_bits": by_seed["tied"].mean(),
                "untied_bits": by_seed["untied"].mean(),
                "mean": mean,
                "ci_low": low,
                "ci_high": high,
                "n_seeds": len(by_seed),
                "verdict": "",
                "lm_nats": lm,
                "paper_same_fraction_bits": paper.fig2_gap_at(state / layers),
                "paper_same_state_bits": paper.FIG2_GAP[state] if state <= paper.FIG2_LAYERS else math.nan,
            }
        )
    out = pd.DataFrame(rows)
    out["ours"] = [format_cell(*r) for r in zip(out["mean"], out["ci_low"], out["ci_high"])]
    return out


def paper_early():
    """(states, tied, untied, gap) of the paper's early half: the mean of FIG2_KL over states 0 .. 7 of 16."""
    n = math.ceil(paper.FIG2_LAYERS / 2)
    tied, untied = (sum(paper.FIG2_KL[role][:n]) / n for role in ("tied", "untied"))
    return f"0-{n - 1}", tied, untied, tied - untied


def write_c3_by_depth(table, csv_path, md_path):
    """results/tables/c3_by_depth.csv (every row and column) and .md: the early-half rows beside the paper's, then
    the per-state rows."""
    states, tied, untied, gap = paper_early()
    notes = (
        f"\nPaper (OLMo-1B vs OLMo-1B-0724, {paper.FIG2_LAYERS} layers), states {states}: tied {tied:.2f}, "
        f"untied {untied:.2f}, C3 {gap:+.2f} bits.\n\nPer state (gap tied minus untied, Student-t 95% over "
        "seeds; fraction = state / layers; the last state is the model's output), beside Figure 2's gap at the "
        "same state index (paper_same_state_bits: state 0 is the embedding in both, state 1 the first block's "
        "output) and at the same fraction of depth (paper_same_fraction_bits: state / layers of its "
        f"{paper.FIG2_LAYERS}, linear between its states):\n\n" + markdown(table[table["scope"] == STATE], STATE_SHOWN)
    )
    write_table(table, csv_path, md_path, columns=EARLY_SHOWN, shown=table[table["scope"] == EARLY], notes=notes)

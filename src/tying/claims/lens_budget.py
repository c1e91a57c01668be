"""C3 against the lens's budget and procedure, for the tying comparison and the null pairs (tying.plan.lens_budget).

Input: each run's sweep (tying.lens.lens_budget.sweep_lenses, with its arch, variant, seed and step) and the
comparisons' (comparison, seed, run a, run b). Per comparison, procedure, batch (windows a step) and budget, C3
is taken per seed as tying.claims.statistics.early_layer_gap takes it (run a in the tied role, run b in the
untied), then its mean and Student-t 95% interval over seeds. Beside it, the state-0 KL of each run, each run's
state-0 floors (tying.lens.floor) and the state-0 gap above the floors, (KL_a - floor_a) - (KL_b - floor_b),
with its own interval; and the gap at every state (`c3_by_state`), with the paper's per-state gaps matched by
state index and by fraction of depth.
"""

import math

import pandas as pd

from tying import paper
from tying.claims.statistics import early_layer_gap, state_gap
from tying.frames import markdown
from tying.io import atomic_path
from tying.lens.procedures import NAMES, procedure_text
from tying.stats import format_cell, mean_ci

RUN = ["arch", "variant", "seed", "step"]
LENS = ["procedure", "batch_size", "steps"]  # one lens of a sweep
INTERVAL = "Student-t 95% over seeds"
PAPER_STATE, PAPER_FRACTION = "paper, same state", "paper, same fraction"


def comparison_frame(sweeps, comparisons, lens=None):
    """The sweeps' rows under each comparison: pair (= comparison), seed, role ("tied" = run a, "untied" = run
    b), procedure, batch_size, tokens_per_step, steps, tokens, layer, kl_bits, floor_bits, readout_floor_bits.
    lens: the config's `lens:` section, whose batch_size and seq_len a sweep written before the sweep had a batch
    axis was trained on (such a sweep has no readout floor: NaN)."""
    if "batch_size" not in sweeps.columns:
        sweeps = sweeps.assign(
            batch_size=lens["batch_size"],
            tokens_per_step=lens["batch_size"] * lens["seq_len"],
            readout_floor_bits=math.nan,
        )
    runs = sweeps.set_index(RUN)
    parts = [
        runs.loc[comp[role]].reset_index(drop=True).assign(pair=comp["comparison"], seed=comp["seed"], role=name)
        for comp in comparisons
        for role, name in (("a", "tied"), ("b", "untied"))
    ]
    return pd.concat(parts, ignore_index=True)


def lens_budget_table(sweeps, comparisons, lens=None):
    """One row per (comparison, procedure, batch_size, steps): tokens_per_step, tokens, n_seeds, k_positive, c3
    mean, ci_low, ci_high, a_state0_bits, b_state0_bits, a_floor_bits, b_floor_bits, a_readout_floor_bits,
    b_readout_floor_bits, above_floor mean, ci_low, ci_high (bits; the runs' values are means over seeds).
    Comparisons and procedures keep their input order, batches and budgets ascend."""
    frame = comparison_frame(sweeps, comparisons, lens)
    rows = []
    for (pair, procedure, batch, steps), group in frame.groupby(["pair", *LENS], sort=False):
        gaps = early_layer_gap(group, lens=None).set_index("seed")["gap_bits"]
        state0 = group[group["layer"] == 0].pivot_table(
            index="seed", columns="role", values=["kl_bits", "floor_bits", "readout_floor_bits"], dropna=False
        )
        excess = state0["kl_bits"] - state0["floor_bits"]
        above = excess["tied"] - excess["untied"]
        mean, low, high = mean_ci(gaps)
        a_mean, a_low, a_high = mean_ci(above)
        rows.append(
            {
                "comparison": pair,
                "procedure": procedure,
                "batch_size": int(batch),
                "tokens_per_step": int(group["tokens_per_step"].iloc[0]),
                "steps": int(steps),
                "tokens": int(group["tokens"].iloc[0]),
                "n_seeds": len(gaps),
                "k_positive": int((gaps > 0).sum()),
                "c3_mean": mean,
                "c3_ci_low": low,
                "c3_ci_high": high,
                **{
                    f"{ab}_{column}": state0[value][role].mean()
                    for ab, role in (("a", "tied"), ("b", "untied"))
                    for column, value in (
                        ("state0_bits", "kl_bits"),
                        ("floor_bits", "floor_bits"),
                        ("readout_floor_bits", "readout_floor_bits"),
                    )
                },
                "above_floor_mean": a_mean,
                "above_floor_ci_low": a_low,
                "above_floor_ci_high": a_high,
                "interval": INTERVAL,
            }
        )
    order = {name: i for i, name in enumerate(dict.fromkeys(c["comparison"] for c in comparisons))}
    return _ordered(pd.DataFrame(rows), order)


def c3_by_state(sweeps, comparisons, lens=None):
    """The gap at every state: one row per (comparison, procedure, batch_size, steps, layer): layers (the models'
    L), fraction (state / L), n_seeds, mean, ci_low, ci_high (tied-role minus untied-role KL, per seed, Student-t
    over seeds), paper_same_state_bits (Figure 2's gap at the same state index, NaN past its 16 layers) and
    paper_same_fraction_bits (at the same fraction of depth, tying.paper.fig2_gap_at)."""
    frame = comparison_frame(sweeps, comparisons, lens)
    rows = []
    for (pair, procedure, batch, steps), group in frame.groupby(["pair", *LENS], sort=False):
        layers = int(group["layer"].max())
        for state in range(layers + 1):
            mean, low, high = mean_ci(state_gap(group, state, lens=None)["gap_bits"])
            rows.append(
                {
                    "comparison": pair,
                    "procedure": procedure,
                    "batch_size": int(batch),
                    "steps": int(steps),
                    "layer": state,
                    "layers": layers,
                    "fraction": state / layers,
                    "n_seeds": group["seed"].nunique(),
                    "mean": mean,
                    "ci_low": low,
                    "ci_high": high,
                    "paper_same_state_bits": paper.FIG2_GAP[state] if state <= paper.FIG2_LAYERS else math.nan,
                    "paper_same_fraction_bits": paper.fig2_gap_at(state / layers),
                }
            )
    order = {name: i for i, name in enumerate(dict.fromkeys(c["comparison"] for c in comparisons))}
    return _ordered(pd.DataFrame(rows), order, ["layer"])


def _ordered(table, order, last=()):
    """Rows by comparison in config order, then procedure in input order, then batch and steps ascending."""
    procedures = {name: i for i, name in enumerate(dict.fromkeys(table["procedure"]))}
    keys = pd.DataFrame(
        {
            "c": table["comparison"].map(order),
            "p": table["procedure"].map(procedures),
            "b": table["batch_size"],
            "s": table["steps"],
            **{k: table[k] for k in last},
        }
    )
    return table.loc[keys.sort_values(["c", "p", "b", "s", *last], kind="stable").index].reset_index(drop=True)


def states_by_lens(sweeps, comparisons, lens=None):
    """Held-out KL per state of each comparison's two runs, mean over seeds: comparison, role (a, b), procedure,
    batch_size, steps, layer, kl_bits, floor_bits; the curves to lay beside the paper's Figure 2."""
    frame = comparison_frame(sweeps, comparisons, lens).replace({"role": {"tied": "a", "untied": "b"}})
    keys = ["pair", "role", *LENS, "layer"]
    out = frame.groupby(keys, sort=False)[["kl_bits", "floor_bits"]].mean().reset_index()
    return out.rename(columns={"pair": "comparison"})


def write_lens_budget(table, by_state, states, described, lens, paths):
    """The table, the per-state gaps and the per-state curves as Parquet, all as one Markdown page: paths
    {"table", "by_state", "states", "md"}; described: tying.plan.lens_budget.described; lens: the config's
    `lens:` section (the procedures' text)."""
    for frame, key in ((table, "table"), (by_state, "by_state"), (states, "states")):
        with atomic_path(paths[key]) as tmp:
            frame.to_parquet(tmp, index=False)
    with atomic_path(paths["md"]) as tmp:
        open(tmp, "w").write(lens_budget_markdown(table, by_state, states, described, lens))


def lens_budget_markdown(table, by_state, states, described, lens):
    """The page: what each procedure and comparison is; C3 per procedure, batch and budget, one column a
    comparison; what the training-length null says; the tying comparison's state 0 against its floors, its gap
    at every state beside the paper's, each other comparison's gap at every state, and the tying comparison's
    per-state curves."""
    names = list(dict.fromkeys(table["comparison"]))
    wide = table.assign(
        cell=[
            f"{format_cell(r.c3_mean, r.c3_ci_low, r.c3_ci_high)} ({r.k_positive}/{r.n_seeds})"
            for r in table.itertuples()
        ]
    )
    wide = wide.pivot_table(
        index=["procedure", "batch_size", "tokens_per_step", "steps", "tokens"],
        columns="comparison",
        values="cell",
        aggfunc="first",
        sort=False,
    )[names].reset_index()
    wide = wide.rename(columns={"batch_size": "windows a step", "tokens_per_step": "tokens a step"})
    first = table[table["comparison"] == names[0]]
    state0 = pd.DataFrame(
        {
            "procedure": first["procedure"],
            "windows a step": first["batch_size"],
            "steps": first["steps"],
            "a state 0": first["a_state0_bits"].round(3),
            "b state 0": first["b_state0_bits"].round(3),
            "a floor": first["a_floor_bits"].round(3),
            "b floor": first["b_floor_bits"].round(3),
            "a readout floor": first["a_readout_floor_bits"].round(3),
            "b readout floor": first["b_readout_floor_bits"].round(3),
            "gap above the floors": [
                format_cell(r.above_floor_mean, r.above_floor_ci_low, r.above_floor_ci_high) for r in first.itertuples()
            ],
        }
    )
    curves = states[states["comparison"] == names[0]].assign(kl_bits=lambda f: f["kl_bits"].round(3))
    curves = (
        curves.pivot_table(
            index=["procedure", "batch_size", "steps", "role"], columns="layer", values="kl_bits", sort=False
        )
        .reset_index()
        .rename(columns=_state_column)
    )
    curves = curves.rename(columns={"batch_size": "windows a step"})
    procedures = [procedure_text(p, lens, b) for p, b in dict.fromkeys(zip(table["procedure"], table["batch_size"]))]
    return "\n".join(
        [
            "# C3 against the lens's budget and procedure",
            "",
            f"C3 (bits): run a's mean held-out KL over the early states minus run b's, per seed; mean [{INTERVAL}] "
            "(seeds with C3 > 0 of all). `tokens`: the tokens each lens trained on (steps x tokens a step). "
            f"{budgets_text()}; the paper's C3 is {paper.CLAIMS['C3'][1]:+.2f} bits.",
            "",
            "Procedures:",
            "",
            *[f"- {text}" for text in procedures],
            "",
            "Comparisons (what each varies, from its runs):",
            "",
            *[f"- {name} ({d['runs']}): {d['text']}" for name, d in described.items()],
            "",
            markdown(wide),
            "",
            *length_sentence(table, described),
            "",
            f"## State 0 against its floors ({names[0]})",
            "",
            "KL at state 0 (bits, mean over seeds); each run's floor (the KL no lens at state 0 can beat: its output "
            "against its mean output given the current token); its readout floor (what the readout, final norm and "
            "unembedding, cannot express of those means: the least KL from each token's mean output to the readout of "
            "any vector, so no lens at state 0 scores below floor + readout floor); and a's excess over its floor "
            f"minus b's [{INTERVAL}].",
            "",
            markdown(state0),
            "",
            f"## The gap at every state ({names[0]})",
            "",
            by_state_text(by_state, names[0]),
            "",
            *[
                line
                for name in names[1:]
                for line in (
                    f"### The gap at every state ({name})",
                    "",
                    by_state_text(by_state, name, with_paper=False),
                    "",
                )
            ],
            f"## Held-out KL by state ({names[0]}, mean over seeds)",
            "",
            markdown(curves),
            "",
        ]
    )


def by_state_text(by_state, comparison, with_paper=True):
    """The per-state gaps of one comparison as a Markdown table, each lens a row, then (with_paper) the paper's
    two rows; without them, a null comparison's gaps, to read against the tying comparison's state by state."""
    rows = by_state[by_state["comparison"] == comparison]
    layers = int(rows["layers"].iloc[0])
    cells = rows.assign(cell=[format_cell(r.mean, r.ci_low, r.ci_high) for r in rows.itertuples()])
    wide = cells.pivot_table(
        index=["procedure", "batch_size", "steps"], columns="layer", values="cell", aggfunc="first", sort=False
    ).reset_index()
    intro = f"Run a's minus run b's KL (bits) at each state 0 .. {layers}, per seed, mean [{INTERVAL}]"
    if with_paper:
        ours = rows.drop_duplicates("layer").set_index("layer")
        paper_rows = pd.DataFrame(
            [
                {
                    "procedure": name,
                    "batch_size": "",
                    "steps": "",
                    **{s: "" if math.isnan(v) else f"{v:.3f}" for s, v in ours[column].items()},
                }
                for name, column in (
                    (PAPER_STATE, "paper_same_state_bits"),
                    (PAPER_FRACTION, "paper_same_fraction_bits"),
                )
            ]
        )
        wide = pd.concat([wide, paper_rows], ignore_index=True)
        intro += (
            f"; state {layers} is the models' own output (0 bits). Beside them Figure 2's gaps (OLMo-1B against "
            f'OLMo-1B-0724, {paper.FIG2_LAYERS} layers): "{PAPER_STATE}" matches by state index (state 0 is the '
            f'embedding in both, state 1 the first block\'s output), "{PAPER_FRACTION}" by fraction of depth '
            f"(state / {layers} of the paper's {paper.FIG2_LAYERS}, linear between its states). The first says "
            "how the embedding state and the first blocks compare; the second where in depth the paper's gap "
            f"would sit in a {layers}-layer model"
        )
    table = wide.rename(columns=_state_column).rename(columns={"batch_size": "windows a step"})
    return f"{intro}.\n\n" + markdown(table)


def length_sentence(table, described):
    """What each comparison that varies only the training length says against the tying comparison (the first),
    from the table's own numbers: the C3 of the last row of the certified procedure (else of the last trained
    procedure) of each, and their ratio. [] without such a comparison."""
    first = list(described)[0]
    lines = []
    for name in [n for n, d in described.items() if d["varies"] == ["length"]]:
        rows = table[(table["comparison"].isin([name, first])) & (table["steps"] > 0)]
        procedure = "certified" if (rows["procedure"] == "certified").any() else rows["procedure"].iloc[-1]
        at = rows[rows["procedure"] == procedure].groupby("comparison").last()
        if name not in at.index or first not in at.index:
            continue
        length, tying = at.loc[name, "c3_mean"], at.loc[first, "c3_mean"]
        where = f"{NAMES[procedure]} at {at.loc[name, 'steps']:,} steps of {at.loc[name, 'batch_size']} windows"
        size = (
            f"{abs(length) / abs(tying):.1f} times its size: C3 between models that differ in training length "
            "is dominated by that difference here"
            if abs(length) > abs(tying)
            else "no larger: training length does not dominate C3 here"
        )
        lines.append(
            f"{name} varies the training length alone: its C3 under {where} is {length:+.3f} bits against "
            f"{first}'s {tying:+.3f}, {size}."
        )
    return lines


def _state_column(column):
    return f"state {column}" if isinstance(column, int) else column


def budgets_text():
    """The lens budgets the paper's C3 comes from (tying.paper.LENS_BUDGETS), as text."""
    return "; ".join(
        f"{who}: {steps} steps of {tokens:,} tokens ({steps * tokens:,})"
        for who, (steps, tokens) in paper.LENS_BUDGETS.items()
    )

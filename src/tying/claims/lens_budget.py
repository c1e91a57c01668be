"""C3 against the lens's budget and procedure, for the tying comparison and the null pairs (tying.plan.lens_budget).

Input: each run's sweep (tying.lens.budget.budget_sweep, with its arch, variant, seed and step) and the
comparisons' (comparison, seed, run a, run b). Per comparison, procedure and budget, C3 is taken per seed as
tying.claims.statistics.early_layer_gap takes it (run a in the tied role, run b in the untied), then its mean
and Student-t 95% interval over seeds. Beside it, the state-0 KL of each run, each run's state-0 floor
(tying.lens.floor) and the state-0 gap above the floors, (KL_a - floor_a) - (KL_b - floor_b), with its own
interval.
"""
import pandas as pd

from tying import paper
from tying.claims.statistics import early_layer_gap
from tying.frames import markdown
from tying.io import atomic_path
from tying.stats import format_cell, mean_ci

RUN = ["arch", "variant", "seed", "step"]
INTERVAL = "Student-t 95% over seeds"


def comparison_frame(sweeps, comparisons):
    """The sweeps' rows under each comparison: pair (= comparison), seed, role ("tied" = run a, "untied" = run
    b), procedure, steps, tokens, layer, kl_bits, floor_bits."""
    runs = sweeps.set_index(RUN)
    parts = [runs.loc[comp[role]].reset_index(drop=True).assign(pair=comp["comparison"], seed=comp["seed"],
                                                                 role=name)
             for comp in comparisons for role, name in (("a", "tied"), ("b", "untied"))]
    return pd.concat(parts, ignore_index=True)


def c3_by_lens(sweeps, comparisons):
    """One row per (comparison, procedure, steps): tokens, n_seeds, k_positive, c3 mean, ci_low, ci_high,
    a_state0_bits, b_state0_bits, a_floor_bits, b_floor_bits, above_floor mean, ci_low, ci_high (bits; the
    runs' values are means over seeds). Comparisons and procedures keep their input order, budgets ascend."""
    frame = comparison_frame(sweeps, comparisons)
    rows = []
    for (pair, procedure, steps), group in frame.groupby(["pair", "procedure", "steps"], sort=False):
        gaps = early_layer_gap(group, lens=None).set_index("seed")["gap_bits"]
        state0 = group[group["layer"] == 0].pivot_table(index="seed", columns="role", values=["kl_bits", "floor_bits"])
        above = ((state0["kl_bits"] - state0["floor_bits"])["tied"] - (state0["kl_bits"] - state0["floor_bits"])["untied"])
        mean, low, high = mean_ci(gaps)
        a_mean, a_low, a_high = mean_ci(above)
        rows.append({"comparison": pair, "procedure": procedure, "steps": int(steps), "tokens": int(group["tokens"].iloc[0]),
                     "n_seeds": len(gaps), "k_positive": int((gaps > 0).sum()), "c3_mean": mean, "c3_ci_low": low,
                     "c3_ci_high": high, "a_state0_bits": state0["kl_bits"]["tied"].mean(),
                     "b_state0_bits": state0["kl_bits"]["untied"].mean(),
                     "a_floor_bits": state0["floor_bits"]["tied"].mean(),
                     "b_floor_bits": state0["floor_bits"]["untied"].mean(), "above_floor_mean": a_mean,
                     "above_floor_ci_low": a_low, "above_floor_ci_high": a_high, "interval": INTERVAL})
    order = {name: i for i, name in enumerate(dict.fromkeys(c["comparison"] for c in comparisons))}
    return _ordered(pd.DataFrame(rows), order)


def _ordered(table, order):
    """Rows by comparison in config order, then procedure in input order, then steps ascending."""
    procedures = {name: i for i, name in enumerate(dict.fromkeys(table["procedure"]))}
    keys = pd.DataFrame({"c": table["comparison"].map(order), "p": table["procedure"].map(procedures), "s": table["steps"]})
    return table.loc[keys.sort_values(["c", "p", "s"]).index].reset_index(drop=True)


def states_by_lens(sweeps, comparisons):
    """Held-out KL per state of each comparison's two runs, mean over seeds: comparison, role (a, b), procedure,
    steps, layer, kl_bits, floor_bits; the curves to lay beside the paper's Figure 2."""
    frame = comparison_frame(sweeps, comparisons).replace({"role": {"tied": "a", "untied": "b"}})
    keys = ["pair", "role", "procedure", "steps", "layer"]
    out = frame.groupby(keys, sort=False)[["kl_bits", "floor_bits"]].mean().reset_index()
    return out.rename(columns={"pair": "comparison"})


def write_c3_by_lens(table, states, comparisons_text, parquet, states_parquet, md):
    """The table and the per-state curves as Parquet, both as one Markdown page (`comparisons_text`: what each
    comparison's runs are)."""
    for frame, path in ((table, parquet), (states, states_parquet)):
        with atomic_path(path) as tmp:
            frame.to_parquet(tmp, index=False)
    with atomic_path(md) as tmp:
        open(tmp, "w").write(c3_by_lens_markdown(table, states, comparisons_text))


def c3_by_lens_markdown(table, states, comparisons_text):
    """The page: C3 per procedure and budget, one column a comparison; the tying comparison's state 0 against
    its floors; its per-state curves."""
    names = list(dict.fromkeys(table["comparison"]))
    wide = table.assign(cell=[f"{format_cell(r.c3_mean, r.c3_ci_low, r.c3_ci_high)} ({r.k_positive}/{r.n_seeds})"
                              for r in table.itertuples()])
    wide = wide.pivot_table(index=["procedure", "steps", "tokens"], columns="comparison", values="cell",
                            aggfunc="first", sort=False)[names].reset_index()
    first = table[table["comparison"] == names[0]]
    state0 = pd.DataFrame({"procedure": first["procedure"], "steps": first["steps"],
                           "a state 0": first["a_state0_bits"].round(3), "b state 0": first["b_state0_bits"].round(3),
                           "a floor": first["a_floor_bits"].round(3), "b floor": first["b_floor_bits"].round(3),
                           "gap above the floors": [format_cell(r.above_floor_mean, r.above_floor_ci_low,
                                                                r.above_floor_ci_high) for r in first.itertuples()]})
    curves = states[states["comparison"] == names[0]].assign(kl_bits=lambda f: f["kl_bits"].round(3))
    curves = curves.pivot_table(index=["procedure", "steps", "role"], columns="layer", values="kl_bits",
                                sort=False).reset_index().rename(columns=lambda c: f"state {c}" if isinstance(c, int) else c)
    return "\n".join([
        "# C3 against the lens's budget and procedure", "",
        f"C3 (bits): run a's mean held-out KL over the early states minus run b's, per seed; mean [{INTERVAL}] "
        "(seeds with C3 > 0 of all). `tokens`: the tokens each lens trained on (steps x windows a step). "
        f"{budgets_text()}; the paper's C3 is {paper.CLAIMS['C3'][1]:+.2f} bits.", "",
        comparisons_text, "", markdown(wide), "",
        f"## State 0 against its floor ({names[0]})", "",
        "KL at state 0 (bits, mean over seeds), each run's floor (the KL no lens at state 0 can beat: its output "
        f"against its mean output given the current token) and a's excess over its floor minus b's [{INTERVAL}].", "",
        markdown(state0), "", f"## Held-out KL by state ({names[0]}, mean over seeds)", "", markdown(curves), ""])


def comparisons_text(described):
    """The comparisons as the config names their runs ({name: {a, b}}), one line each."""
    def run(ref):
        at = f" at step {ref['step']}" if "step" in ref else ""
        offset = f", seed + {ref['seed_offset']}" if ref.get("seed_offset") else ""
        return f"{ref['arch']}/{ref['variant']}{at}{offset}"
    return "\n".join(f"- {name}: a = {run(spec['a'])}, b = {run(spec['b'])}" for name, spec in described.items())


def budgets_text():
    """The lens budgets the paper's C3 comes from (tying.paper.LENS_BUDGETS), as text."""
    return "; ".join(f"{who}: {steps} steps of {tokens:,} tokens ({steps * tokens:,})"
                     for who, (steps, tokens) in paper.LENS_BUDGETS.items())

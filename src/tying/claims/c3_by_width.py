"""C3 by state against width (scaling.c3_by_width; tying.plan.c3_by_width says where each input comes from).

Per width cell, narrow to wide, per lens, per state 0..L: the tied and the untied model's held-out KL (bits,
means over seeds) and the gap, tied minus untied, taken per seed (a seed's tied and untied runs share their data
order), its mean and Student-t 95% interval over seeds. The lenses: "logit" and "certified <steps>" (the
config's lens recipe) from the lens jobs' metric, "tuned_lens <steps>" (tuned-lens's optimiser) from the
lens_budget sweeps, one a budget. Beside each state, each role's residual share (tying.lens.residual_share: mean
||h_0|| / ||h_s|| and cos(h_s, h_0), means over seeds), the same on every lens's row of the state; beside each
cell, each role's margin over its bigram table at the final step (nats, mean over seeds) and the worst model's
(the largest over models and seeds, what the claims' LM row needs below zero). `fraction` = state / L; state L
is the model's output, 0 bits under every lens.
"""

import pandas as pd

from tying import paper
from tying.errors import PipelineError
from tying.frames import at_step, markdown
from tying.io import atomic_path
from tying.plan.c3_by_width import PROCEDURE
from tying.stats import format_cell, mean_ci

ROLES = ("tied", "untied")
COLUMNS = [
    "cell",
    "hidden_size",
    "layers",
    "steps",
    "lens",
    "procedure",
    "lens_steps",
    "lens_tokens",
    "state",
    "fraction",
    "tied_bits",
    "untied_bits",
    "mean",
    "ci_low",
    "ci_high",
    "n_seeds",
    "tied_norm_ratio",
    "untied_norm_ratio",
    "tied_cosine",
    "untied_cosine",
    "tied_lm_nats",
    "untied_lm_nats",
    "worst_lm_nats",
]
INTERVAL = "Student-t 95% over seeds"


def c3_by_width(cells, lens, sweeps, share, quality, certified):
    """The C3-by-width table (COLUMNS), cells narrow to wide, then lenses (logit, tuned_lens by budget,
    certified), then states.

    cells: tying.plan.c3_by_width.width_cells; lens: the lens jobs' metric of the cells' runs (pair, role, seed,
    layer, lens "tuned"/"logit", kl_bits); sweeps: their lens_budget sweeps (arch, variant, seed, step,
    procedure, steps, tokens, layer, kl_bits); share: their residual share (pair, role, seed, layer, norm_ratio,
    cosine); quality: the cells' quality metric (pair, seed, role, step, margin); certified: the lens recipe's
    (steps, tokens).
    """
    if not cells:
        raise PipelineError("C3 by width: no cell has the tuned lens (scaling.lens)")
    frames = [
        _cell_rows(
            c,
            lens[lens["pair"] == c["cell"]],
            _roles(c, sweeps),
            share[share["pair"] == c["cell"]],
            quality[quality["pair"] == c["cell"]],
            certified,
        )
        for c in sorted(cells, key=lambda c: c["hidden_size"])
    ]
    return pd.concat(frames, ignore_index=True)[COLUMNS]


def _roles(cell, sweeps):
    """A cell's tuned_lens sweep rows at its final step, with pair (the cell) and role from their variants."""
    roles = {cell["tied"]: "tied", cell["untied"]: "untied"}
    rows = sweeps[
        (sweeps["arch"] == cell["cell"])
        & sweeps["variant"].isin(roles)
        & (sweeps["step"] == cell["steps"])
        & (sweeps["procedure"] == PROCEDURE)
    ]
    return rows.assign(pair=cell["cell"], role=rows["variant"].map(roles))


def _cell_rows(cell, lens, sweeps, share, quality, certified):
    """One cell's rows: every lens at every state, with the state's residual share and the cell's margins."""
    name, layers = cell["cell"], cell["layers"]
    seeds = sorted(lens["seed"].unique())
    if not seeds:
        raise PipelineError(f"C3 by width: cell {name} has no lens metric")
    if sweeps.empty:
        raise PipelineError(f"C3 by width: cell {name} has no {PROCEDURE} sweep rows at step {cell['steps']}")
    sources = [
        ("logit", "logit", 0, 0, lens[lens["lens"] == "logit"]),
        *[
            (f"{PROCEDURE} {steps}", PROCEDURE, steps, _one_tokens(name, steps, rows), rows)
            for steps, rows in sweeps.groupby("steps")
        ],
        (f"certified {certified[0]}", "certified", *certified, lens[lens["lens"] == "tuned"]),
    ]
    residual = _complete(name, "residual share", share, seeds, layers)
    residual = residual.groupby(["layer", "role"])[["norm_ratio", "cosine"]].mean().unstack("role")
    margins = at_step(quality)
    margins = margins[margins["role"].isin(ROLES)]
    if set(margins["role"]) != set(ROLES):
        raise PipelineError(f"C3 by width: cell {name}'s quality metric lacks its tied or untied model")
    facts = {
        "cell": name,
        "hidden_size": cell["hidden_size"],
        "layers": layers,
        "steps": cell["steps"],
        **{f"{role}_lm_nats": margins.loc[margins["role"] == role, "margin"].mean() for role in ROLES},
        "worst_lm_nats": margins["margin"].max(),
    }
    rows = []
    for label, procedure, lens_steps, tokens, frame in sources:
        wide = _complete(name, f"{label} lens", frame, seeds, layers).pivot(
            index=["layer", "seed"], columns="role", values="kl_bits"
        )
        for state, by_seed in wide.groupby(level="layer"):
            mean, low, high = mean_ci(by_seed["tied"] - by_seed["untied"])
            rows.append(
                facts
                | {
                    "lens": label,
                    "procedure": procedure,
                    "lens_steps": lens_steps,
                    "lens_tokens": tokens,
                    "state": state,
                    "fraction": state / layers,
                    "tied_bits": by_seed["tied"].mean(),
                    "untied_bits": by_seed["untied"].mean(),
                    "mean": mean,
                    "ci_low": low,
                    "ci_high": high,
                    "n_seeds": len(by_seed),
                    **{
                        f"{role}_{key}": residual.loc[state, (key, role)]
                        for key in ("norm_ratio", "cosine")
                        for role in ROLES
                    },
                }
            )
    return pd.DataFrame(rows)


def _one_tokens(cell, steps, rows):
    """The tokens a budget's lenses trained on: one number, or the sweeps mix lens batches."""
    tokens = rows["tokens"].unique()
    if len(tokens) != 1:
        raise PipelineError(
            f"C3 by width: cell {cell}'s {PROCEDURE} sweeps at {steps} steps trained on "
            f"{sorted(tokens)} tokens; give one lens batch"
        )
    return int(tokens[0])


def _complete(cell, source, frame, seeds, layers):
    """`frame` (pair, role, seed, layer), checked to hold each role of each seed at states 0..layers, once."""
    have = {key: sorted(rows["layer"]) for key, rows in frame.groupby(["role", "seed"])}
    for role in ROLES:
        for seed in seeds:
            states = have.get((role, seed))
            if states != list(range(layers + 1)):
                found = "none" if states is None else f"states {states}"
                raise PipelineError(
                    f"C3 by width: cell {cell}'s {source} of the {role} run of seed {seed} has "
                    f"{found}, not states 0-{layers} once"
                )
    extra = sorted(set(frame["seed"]) - set(seeds))
    if extra:
        raise PipelineError(f"C3 by width: cell {cell}'s {source} has seeds {extra} its lens metric lacks")
    return frame


def paper_gaps():
    """The paper's per-state gap, tied minus untied (bits), of Figure 2's curves: one a state 0..16."""
    return [t - u for t, u in zip(paper.FIG2_KL["tied"], paper.FIG2_KL["untied"])]


def write_c3_by_width(table, csv_path, md_path):
    """results/tables/c3_by_width.csv (every row and column) and .md (the page `c3_by_width_markdown`)."""
    with atomic_path(csv_path) as tmp:
        table.to_csv(tmp, index=False)
    with atomic_path(md_path) as tmp:
        tmp.write_text(c3_by_width_markdown(table))


def c3_by_width_markdown(table):
    """The page: each cell's models and margins; per cell and state the logit lens's KL, the gap under every lens
    and the residual share; the paper's per-state gaps."""
    lenses = list(dict.fromkeys(table["lens"]))
    models = table.drop_duplicates("cell")[
        ["cell", "hidden_size", "layers", "steps", "n_seeds", "tied_lm_nats", "untied_lm_nats", "worst_lm_nats"]
    ]
    cells = table.assign(gap=[format_cell(*r) for r in zip(table["mean"], table["ci_low"], table["ci_high"])])
    wide = cells.pivot(index=["cell", "state"], columns="lens", values="gap")[lenses].add_prefix("gap ")
    logit = table[table["lens"] == "logit"].set_index(["cell", "state"])[["tied_bits", "untied_bits"]]
    first = table.drop_duplicates(["cell", "state"]).set_index(["cell", "state"])
    share = first[["tied_norm_ratio", "untied_norm_ratio", "tied_cosine", "untied_cosine"]]
    states = pd.concat(
        [
            first[["fraction"]],
            logit.set_axis(["logit tied", "logit untied"], axis=1),
            wide,
            share.set_axis(["tied norm ratio", "untied norm ratio", "tied cos", "untied cos"], axis=1),
        ],
        axis=1,
    ).reset_index()
    described = table.drop_duplicates("lens")
    what = "; ".join(
        f"{r.lens}: {r.lens_steps:,} steps of {r.lens_tokens // max(r.lens_steps, 1):,} tokens"
        for r in described.itertuples()
        if r.procedure != "logit"
    )
    paper_text = ", ".join(f"{s} {g:+.2f}" for s, g in enumerate(paper_gaps()))
    return "\n".join(
        [
            "# C3 by state against width",
            "",
            "Each width's tied and untied models. LM margins: each model's validation "
            "loss minus its bigram table's at the final step (nats; tied and untied: means over seeds; worst: the "
            "largest over models and seeds).",
            "",
            markdown(models),
            "",
            f"Per state: the logit lens's KL (bits, means over seeds); the gap tied minus untied under each lens "
            f"(bits: mean [{INTERVAL}]); the residual share, mean ||h_0|| / ||h_s|| and mean cos(h_s, h_0) over the "
            f"held-out tokens (h_L: the last block's output before the final norm), means over seeds. fraction = "
            f"state / layers; the last state is the model's output. Lenses: {what} (tuned_lens: tuned-lens 0.2's "
            "optimiser and schedule on this config's lens batch; certified: this config's lens recipe, whose "
            "certificate is in results/tables/scaling.md).",
            "",
            markdown(states),
            "",
            f"Paper (OLMo-1B vs OLMo-1B-0724, {paper.FIG2_LAYERS} layers), gap by state (bits, Figure 2's tuned "
            f"lens): {paper_text}.",
            "",
        ]
    )

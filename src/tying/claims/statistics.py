"""Each claim's statistic within each seed, from the tidy metric frames (tying.claims.definitions).

A statistic is computed per seed (paired: the tied and untied runs of one seed share data order) so that
tying.claims.verdicts can summarise it over seeds. A single released pair of models has no seeds: C1 and C2
then carry their per-token values for a bootstrap over tokens.
"""

from functools import partial

import numpy as np
import pandas as pd

from tying.claims.definitions import CALIBRATED, CHANCE_QUANTILE, NORM_SHUFFLES, Statistic
from tying.errors import PipelineError
from tying.frames import at_step, only, pick
from tying.lens.certificate import NOT_CONVERGED, certificate, seed_window_interval, worst_state
from tying.metrics.model_quality import quality_detail, worst_margin
from tying.metrics.norm_frequency import rise_and_fall, shape_stats, shuffled_rise_fall
from tying.stats import format_cell, mean_ci


def alignment_gap(alignment, pair="main", step=None, scored="held_out", target="true", per_token=False):
    """C1: mean linear-map cosine output_u->tied minus input_u->tied -> Series by seed.

    scored / target pick the held-out or in-sample cosines, of the true or permuted targets.
    per_token: the per-token differences of the (single) seed instead, indexed by token_id.
    """
    rows = at_step(only(alignment, pair=pair, map="linear", scored=scored, target=target), step)
    if per_token:
        cos = _one_seed(rows).set_index(["token_id", "comparison"])["cosine"].unstack()
        return pick(cos, "output_u->tied", "alignment") - pick(cos, "input_u->tied", "alignment")
    means = rows.groupby(["seed", "comparison"])["cosine"].mean().unstack()
    return pick(means, "output_u->tied", "alignment") - pick(means, "input_u->tied", "alignment")


def knn_gap(knn, pair="main", k=10, step=None, column="overlap", per_token=False):
    """C2: overlap tied_vs_output_u minus tied_vs_input_u at `k` -> Series by seed.

    column: "overlap", or "null_overlap" for the permuted-rows chance level; per_token: the
    per-token differences of the (single) seed instead, indexed by token_id.
    """
    rows = at_step(only(knn, pair=pair, k=k), step)
    if per_token:
        wide = _one_seed(rows).set_index(["token_id", "comparison"])[column].unstack()
    else:
        wide = rows.groupby(["seed", "comparison"])[column].mean().unstack()
    return pick(wide, "tied_vs_output_u", "knn") - pick(wide, "tied_vs_input_u", "knn")


def early_layer_gap(df, lens="tuned", value="kl_bits", by=()):
    """Claim C3 statistic: tied minus untied mean KL over each model's early states.

    df: tidy frame with pair, role ("tied"/"untied"), seed, layer (states 0..L), lens (None: every
    row, a frame of one lens), `value` (kl_bits) and the columns `by` (e.g. window). Early states are
    0 .. ceil(L/2)-1, the first half of the L states that have a translator. Returns one row per
    (pair, seed, *by): tied_bits, untied_bits, gap_bits.
    """
    d = df if lens is None else df[df["lens"] == lens]
    n_blocks = d.groupby(["pair", "role", "seed"])["layer"].transform("max")
    return _role_gap(d[d["layer"] < np.ceil(n_blocks / 2)], value, by, f"early-layer KL gap ({lens} lens)")


def state_gap(df, state, lens="tuned", value="kl_bits", by=()):
    """Claim C3s0's statistic at `state` 0 (and C3 by state at any state): tied minus untied KL there.

    df as early_layer_gap's; returns the same columns, one row per (pair, seed, *by)."""
    d = df if lens is None else df[df["lens"] == lens]
    return _role_gap(d[d["layer"] == state], value, by, f"state-{state} KL gap ({lens} lens)")


def _role_gap(rows, value, by, what):
    """Tied minus untied mean `value` of `rows` per (pair, seed, *by)."""
    means = rows.groupby(["pair", "seed", *by, "role"])[value].mean().unstack("role")
    missing = {"tied", "untied"} - set(means.columns)
    if missing or means.isna().any().any():
        raise PipelineError(f"{what} needs a tied and an untied model for every pair and seed")
    means = means.rename(columns={"tied": "tied_bits", "untied": "untied_bits"})
    means["gap_bits"] = means["tied_bits"] - means["untied_bits"]
    return means.reset_index()[["pair", "seed", *by, "tied_bits", "untied_bits", "gap_bits"]].rename_axis(columns=None)


def lens_statistic(lens, windows=None, reference=None, pair="main", state=None, null=None):
    """C3 (state None: the early half) or C3s0 (state 0): per-seed values (lens_gap), their interval over
    seeds and validation windows, and the lens certificate (tying.lens.certificate), whose failure makes the
    verdict "lens not converged".

    windows: the lens jobs' per-window frames (pair, role, seed, window, layer, kl_bits, kl_check_bits,
    check_step, steps); reference: the lens_convergence jobs' frames (pair, role, seed, layer,
    kl_budget_bits, kl_bits, change_bits, steps, reference_steps). Without windows: the seeds'
    t-interval and no certificate. At state 0 the detail adds the gap above each model's state-0 floors where
    the lens metric has them (floor_detail); `null`: the matched null run's lens metric (role "null"), whose
    gap against the untied model the detail gives (null_detail).
    """
    gap = early_layer_gap if state is None else partial(state_gap, state=state)
    name = "C3" if state is None else f"C3s{state}"
    values = lens_gap(lens, pair, state)
    extra = [floor_detail(only(lens, pair=pair, lens="tuned"))] if state is not None else []
    extra += [null_detail(lens, null, pair, state)] if null is not None else []
    if windows is None:
        return Statistic(values, detail="; ".join(d for d in extra if d))
    rows = only(windows, pair=pair)
    per_window = gap(rows, lens=None, by=("window",)).pivot(index="window", columns="seed", values="gap_bits")
    mean, low, high, how = seed_window_interval(values, per_window)
    check = gap(rows, lens=None, value="kl_check_bits").set_index("seed")["gap_bits"]
    ref = None
    if reference is not None:
        r = only(reference, pair=pair)
        gaps = [gap(r, lens=None, value=v)["gap_bits"].iloc[0] for v in ("kl_bits", "kl_budget_bits")]
        ref = {
            "seed": int(r["seed"].iloc[0]),
            "steps": int(r["steps"].iloc[0]),
            "reference_steps": int(r["reference_steps"].iloc[0]),
            "gap": gaps[0],
            "budget_gap": gaps[1],
            "states": worst_state(r),
        }
    passed, detail = certificate(
        values, check, int(rows["steps"].iloc[0]), int(rows["check_step"].iloc[0]), (high - low) / 2, ref, name=name
    )
    return Statistic(
        values,
        detail="; ".join(d for d in (detail, *extra) if d),
        interval=(low, high, how),
        verdict="" if passed else NOT_CONVERGED,
    )


def lens_gap(lens, pair="main", state=None):
    """C3 (state None) or the gap at `state` per seed, of the tuned lens metric (pair, role, seed, layer, lens,
    kl_bits) -> Series by seed."""
    gaps = early_layer_gap(lens) if state is None else state_gap(lens, state)
    return only(gaps, pair=pair).set_index("seed")["gap_bits"]


def floor_detail(lens):
    """C3s0's gap above the floors under every lens at state 0 (tying.lens.floor), from one pair's tuned-lens
    metric with floor_bits and readout_floor_bits columns: per seed (KL_tied - floor_tied) - (KL_untied -
    floor_untied), its mean and Student-t interval over seeds, and the floors' means; "" without the columns
    (a metric written before the lens job computed them) or where a floor was not computed (NaN)."""
    if "floor_bits" not in lens.columns or lens["floor_bits"].isna().any():
        return ""
    rows = lens[lens["layer"] == 0].assign(above_bits=lambda f: f["kl_bits"] - f["floor_bits"])
    above = state_gap(rows, 0, lens=None, value="above_bits").set_index("seed")["gap_bits"]
    floors = rows.groupby("role")[["floor_bits", "readout_floor_bits"]].mean()
    text = (
        f"above the state-0 floors (KL - floor, tied minus untied): {format_cell(*mean_ci(above))} "
        f"(Student-t 95% over {above.notna().sum()} seeds); floors tied {floors.loc['tied', 'floor_bits']:.3f}, "
        f"untied {floors.loc['untied', 'floor_bits']:.3f} bits"
    )
    if floors["readout_floor_bits"].notna().all():
        text += (
            f", the readout's further floor tied {floors.loc['tied', 'readout_floor_bits']:.3f}, untied "
            f"{floors.loc['untied', 'readout_floor_bits']:.3f} bits"
        )
    return text


def null_detail(lens, null, pair, state=None):
    """The matched null's C3 (state None) or gap at `state`: the untied model's KL minus the matched null
    run's (the untied recipe from another start on the same batches: tying.plan.claims.matched_null), per seed
    both have, as text with its mean and Student-t interval over those seeds."""
    own = only(lens, pair=pair, role="untied", lens="tuned")
    other = only(null, pair=pair, lens="tuned")
    seeds = sorted(set(own["seed"]) & set(other["seed"]))
    rows = pd.concat([own.assign(role="tied"), other.assign(role="untied")], ignore_index=True)
    values = lens_gap(rows[rows["seed"].isin(seeds)], pair, state)
    model = other["model"].iloc[0] if "model" in other.columns else "the matched null run"
    return (
        f"matched null (untied minus {model}: another start, the same batches): {format_cell(*mean_ci(values))} "
        f"(Student-t 95% over {len(values)} seeds)"
    )


def drift_gap(evolution, run="main"):
    """C4 per seed: last-step drift of the input minus the output matrix -> Series by seed."""
    rows = at_step(only(evolution, run=run), by=("run",))
    drift = rows.set_index(["seed", "matrix"])["drift"].unstack()
    return pick(drift, "input", "evolution") - pick(drift, "output", "evolution")


def output_share(grad_flow, pair="main", variant="tied", steps=None, column="out_share"):
    """C5 per seed: mean `column` (out_share, or proxy_out_share for C5p) over steps <= `steps`
    (None: every logged step) -> Series by seed."""
    rows = only(grad_flow, pair=pair, variant=variant)
    if steps is not None:
        if rows["step"].max() < steps:
            raise PipelineError(
                f"grad_flow metric ends at step {rows['step'].max()}, before the early window's step {steps}"
            )
        rows = rows[rows["step"] <= steps]
    return rows.groupby("seed")[column].mean()


def norm_shape(norm_freq, pair="main", shuffles=NORM_SHUFFLES):
    """C6a, C6c and C6b per seed from shape_stats on the runs' draws -> Statistics (C6a, C6b, C6c).

    C6c is net of weight decay (shape_stats' net_drift) where the run's no-gradient level is recorded, raw
    (drift) where it is not; its detail gives the raw values. Decay alone scales every row by one factor,
    which leaves C6a's ratio of binned norms as it is: C6a carries the level beside it, uncorrected.
    C6b's value is rise_and_fall minus the 95th percentile of its values with the seed's norms
    shuffled across tokens (`shuffles` times, seeded by the seed); its chance level is the shuffled
    values' mean on the same scale, its detail the peak bins' draws and the shuffled quantile
    (medians over seeds)."""
    flat, near, raw, level, excess, chance, peaks, quantile = {}, {}, {}, {}, {}, {}, {}, {}
    for seed, rows in only(norm_freq, pair=pair).groupby("seed"):
        shape = shape_stats(rows)
        by_matrix = shape.set_index("matrix")
        flat[seed] = pick(by_matrix["spread"], "untied_input", "norm_freq")
        raw[seed], level[seed] = by_matrix.loc["untied_input", "drift"], _level(rows, "untied_input")
        near[seed] = raw[seed] if np.isnan(level[seed]) else by_matrix.loc["untied_input", "net_drift"]
        null = shuffled_rise_fall(rows, shuffles, seed=int(seed))
        quantile[seed] = float(np.quantile(null, CHANCE_QUANTILE))
        excess[seed] = rise_and_fall(shape) - quantile[seed]
        chance[seed] = float(null.mean()) - quantile[seed]
        peaks[seed] = by_matrix["peak_count"]
    peak = pd.DataFrame(peaks).median(axis=1)
    detail = (
        "peak bin at ~"
        + ", ".join(f"{peak[m]:,.0f} draws ({m.replace('_', ' ')})" for m in ("untied_output", "tied"))
        + f"; shuffled norms' {CHANCE_QUANTILE:.0%} quantile {np.median(list(quantile.values())):.3f} "
        f"({shuffles} shuffles a seed)"
    )
    flat, near, raw, level, excess, chance = (
        pd.Series(v, dtype=float).rename_axis("seed") for v in (flat, near, raw, level, excess, chance)
    )
    return (
        Statistic(flat, level=level, detail=_decay_detail(level)),
        Statistic(excess, chance=chance, detail=detail),
        Statistic(near, level=level, detail=_decay_detail(level, raw)),
    )


def _level(rows, matrix):
    """One matrix's no-gradient level in a seed's norm_freq rows (NaN where not recorded)."""
    if "no_gradient_level" not in rows.columns:
        return np.nan
    return float(rows.loc[rows["matrix"] == matrix, "no_gradient_level"].mean())


def _decay_detail(level, raw=None):
    """What C6a's (raw None) or C6c's values say about weight decay: C6c's values with the decay left in."""
    if level.isna().all():
        return "" if raw is None or raw.isna().all() else "no training record: weight decay not removed"
    if raw is None:
        return "weight decay alone scales every row alike, which leaves this ratio as it is"
    return f"decay included (|final / step-0 - 1|): {format_cell(*mean_ci(raw))}"


def scaling_shift(
    scaling, pair="main", variant="tied_x5", reference="input_u", step=None, scored="held_out", target="true"
):
    """C7a (reference input_u) or C7b (output_u) per seed: cos(x_k, reference) - cos(tied, reference)
    -> Series by seed."""
    rows = only(scaling, pair=pair, scored=scored, target=target, reference=reference)
    rows = at_step(rows[rows["variant"].isin(["tied", variant])], step)
    cos = rows.set_index(["seed", "variant"])["cosine"].unstack()
    return pick(cos, variant, "scaling") - pick(cos, "tied", "scaling")


def claim_statistics(
    alignment=None,
    knn=None,
    evolution=None,
    grad_flow=None,
    norm_freq=None,
    scaling=None,
    lens=None,
    quality=None,
    *,
    pair="main",
    k=10,
    early_steps=None,
    scaled_variant="tied_x5",
    lens_convergence=None,
    norm_shuffles=NORM_SHUFFLES,
    lens_windows=None,
    lens_null=None,
):
    """Statistic of every claim whose metric frame is given: {claim id: Statistic}.

    Frames are the tidy metric tables (`quality`: tying.metrics.model_quality's rows, claim LM; `lens`: the lens
    metric of both models of the pair; `lens_windows`, `lens_convergence`: the lens jobs' per-window KL and
    the reference lenses' checks, C3's and C3s0's interval and certificate; `lens_null`: the lens metric of the
    pair's matched null run, their detail's null); early_steps: the last step of "early
    training" for C5 (None: every logged step); norm_shuffles: C6b's chance level's shuffles.
    """
    out = {}
    if quality is not None:
        rows = only(quality, pair=pair)
        out["LM"] = Statistic(worst_margin(rows), detail=quality_detail(rows))
    if alignment is not None:
        out["C1"] = Statistic(
            alignment_gap(alignment, pair),
            in_sample=alignment_gap(alignment, pair, scored="in_sample"),
            chance=alignment_gap(alignment, pair, target="permuted"),
            per_token=_single(alignment_gap, alignment, pair),
        )
    if knn is not None:
        out["C2"] = Statistic(
            knn_gap(knn, pair, k),
            chance=knn_gap(knn, pair, k, column="null_overlap"),
            per_token=_single(knn_gap, knn, pair, k),
        )
    if lens is not None:
        out["C3"] = lens_statistic(lens, lens_windows, lens_convergence, pair, null=lens_null)
        out["C3s0"] = lens_statistic(lens, lens_windows, lens_convergence, pair, state=0, null=lens_null)
    if evolution is not None:
        out["C4"] = Statistic(drift_gap(evolution, pair))
    if grad_flow is not None:
        out["C5"] = Statistic(output_share(grad_flow, pair, steps=early_steps))
        out["C5p"] = Statistic(output_share(grad_flow, pair, steps=early_steps, column="proxy_out_share"))
    if norm_freq is not None:
        out["C6a"], out["C6b"], out["C6c"] = norm_shape(norm_freq, pair, norm_shuffles)
    if scaling is not None:
        for cid, reference in (("C7a", "input_u"), ("C7b", "output_u")):
            out[cid] = Statistic(
                scaling_shift(scaling, pair, scaled_variant, reference),
                in_sample=scaling_shift(scaling, pair, scaled_variant, reference, scored="in_sample"),
                chance=scaling_shift(scaling, pair, scaled_variant, reference, target="permuted"),
            )
    return out


def seed_statistics(seeds, pair):
    """{claim: Statistic} of one pair's per-seed values from a seed_table frame (pair, claim, seed, value)."""
    rows = seeds[seeds["pair"] == pair]
    return {cid: Statistic(g.set_index("seed")["value"]) for cid, g in rows.groupby("claim", sort=False)}


def calibrated_statistics(statistics, mixture):
    """{C1cal, C2cal: Statistic} from the claims pair's and the mixture control's {claim: Statistic}: the
    pair's per-seed C1 and C2 minus the mixture's, on the seeds both have."""
    out = {}
    for cal, cid in CALIBRATED.items():
        if cid in statistics and cid in mixture:
            own, ref = statistics[cid].values, mixture[cid].values
            shared = own.index.intersection(ref.index)
            out[cal] = Statistic(own[shared] - ref[shared])
    return out


def _single(gap, frame, *args):
    """Per-token values of `gap` when the frame holds one seed (a released pair), else None."""
    return gap(frame, *args, per_token=True) if frame["seed"].nunique() == 1 else None


def _one_seed(rows):
    if rows["seed"].nunique() != 1:
        raise PipelineError("per-token claim values need exactly one seed")
    return rows

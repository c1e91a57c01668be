"""The paper's claims as per-seed statistics, summarised over seeds, with a verdict each.

Each claim's statistic is computed within each seed (paired: the tied and untied runs of one
seed share data order), then summarised as the mean with a Student-t 95% interval over seeds
(tying.stats). Every claim says "statistic > threshold" (or "<"). Verdict, with at least
MIN_SEEDS seeds: "holds" when the interval lies on the claimed side of the threshold, "does not
hold" when it lies on the other, "inconclusive" when it crosses. With fewer seeds the verdict
says "direction only". A single released pair of models has no seeds: C1 and C2 then get a
bootstrap interval over tokens and a verdict marked "one pair of models".
"""
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from tying.errors import PipelineError
from tying.frames import at_step, markdown, only, pick
from tying.io import atomic_path, write_parquet
from tying.lens_certificate import NOT_CONVERGED, certificate, seed_window_interval
from tying.model_quality import quality_detail, worst_margin
from tying.norm_frequency import BINS_PER_DECADE, MIN_BIN_TOKENS, rise_and_fall, shape_stats, shuffled_rise_fall
from tying.stats import format_cell, mean_ci, token_bootstrap_ci

MIN_SEEDS = 3
FLAT_SPREAD = 0.25  # C6a: the input's binned mean norms vary by less than a quarter of their median
NEAR_INITIAL = 0.25  # C6c: no bin's mean input norm moves by a quarter of its step-0 value
NORM_SHUFFLES = 200  # C6b's chance level: shuffles of the norms across tokens, per seed
CHANCE_QUANTILE = 0.95  # C6b must rise and fall by more than this quantile of its shuffled values


@dataclass(frozen=True)
class Claim:
    """One paper claim: what is measured, the paper's numbers, and the criterion."""

    description: str
    statistic: str
    paper: str
    paper_value: float  # the paper's value of the statistic (NaN: none)
    threshold: float = 0.0
    tolerance: float = math.nan  # paper-scale vs paper difference that gets flagged (NaN: no flag)
    direction: str = ">"

    @property
    def criterion(self):
        return f"{self.statistic} {self.direction} {self.threshold:g}"

    def on_side(self, value):
        """True where `value` is on the claimed side of the threshold."""
        return value > self.threshold if self.direction == ">" else value < self.threshold


@dataclass(frozen=True)
class Statistic:
    """A claim's values: per seed (the verdict's), and where defined in sample, at chance, per token."""

    values: pd.Series
    in_sample: pd.Series = None
    chance: pd.Series = None
    per_token: pd.Series = None  # one seed's per-token values, for a single released pair
    detail: str = ""  # what the verdict alone does not say (C6b: where the peak is)
    interval: tuple = None  # (low, high, how): in place of the seeds' t-interval (C3: seeds and windows)
    verdict: str = ""  # in place of the interval's verdict (C3: "lens not converged")


CLAIMS = {
    "LM": Claim(
        "The pair's models predict held-out text better than a bigram table of the tokens they drew",
        "largest over the pair's models of validation loss minus the interpolated bigram table's, on the same "
        "targets (nats)",
        "not in the paper (its models are trained language models)", math.nan, direction="<",
    ),
    "C1": Claim(
        "The tied matrix aligns better with the untied output matrix than with the untied input matrix",
        "held-out mean linear-map cosine Output(U)->Tied minus Input(U)->Tied (maps fitted on 80% of tokens)",
        "0.719 vs 0.525 (+0.194), in sample", 0.194, tolerance=0.02,
    ),
    "C2": Claim(
        "The tied matrix's nearest neighbours match Output(U)'s more than Input(U)'s",
        "KNN@k overlap Tied vs Output(U) minus Tied vs Input(U)",
        "0.733 vs 0.496 at k=10 (+0.237)", 0.237, tolerance=0.02,
    ),
    "C3": Claim(
        "The tied model's early layers are further from the output space (tuned lens)",
        "tied minus untied mean tuned-lens KL over the early half of the states (bits)",
        "states 0-7 of 16: mean 5.66 vs 4.64 bits (+1.01); input layer 8.86 vs 7.01", 1.014, tolerance=0.2,
    ),
    "C4": Claim(
        "In an untied run the output matrix moves further from its initialisation than the input matrix",
        "final-step drift (cosine to step 0) of input minus output, untied run",
        "OLMo-1B-0724 at 20k: input 0.87 vs output 0.56 (+0.31)", 0.31,
    ),
    "C5": Claim(
        "The output path dominates the tied matrix's gradient early in training",
        "mean output share ||G_out|| / (||G_in|| + ||G_out||) over the early steps, tied run",
        "70-83% over the first 1000 of 10000 steps", math.nan, threshold=0.5,
    ),
    "C5p": Claim(
        "C5 as the paper's code measured it",
        "mean over the early steps of R(||G_out||) / (R(||dL/d embedding output||) + R(||G_out||)), R a trailing "
        "20-step rolling mean (the authors' plot_gradient_provenance.py), tied run",
        "70-83% over the first 1000 of 10000 steps", math.nan, threshold=0.5,
    ),
    "C6a": Claim(
        "Untied input row norms stay flat across token frequency",
        f"spread of the untied input's binned mean norm: (max - min) / median over 1/{BINS_PER_DECADE}-decade "
        f"bins of log10 draws (how often the run drew the token), a bin of < {MIN_BIN_TOKENS} tokens merged with "
        "its rarer neighbours within half a decade (every analysed token in a bin)",
        "qualitative: input flat near its initial value", math.nan, threshold=FLAT_SPREAD, direction="<",
    ),
    "C6b": Claim(
        "Untied output and tied row norms rise with frequency and then fall",
        "min over untied output and tied of min(rise, fall) of the binned mean norm (bins as C6a), each relative "
        "to the peak bin (0 when the peak is the first or last bin), minus its 95th percentile with the norms "
        "shuffled across tokens (the seed's own chance level); detail: the peak bins' draws",
        "qualitative: rise up to ~1e4 occurrences, then fall", math.nan, threshold=0.0,
    ),
    "C6c": Claim(
        "Untied input row norms stay near their initial value",
        "largest relative change |final / step-0 - 1| of the untied input's binned mean norm (bins as C6a), "
        "against the same tokens' norms at step 0",
        "qualitative: input flat near its initial value", math.nan, threshold=NEAR_INITIAL, direction="<",
    ),
    "C7a": Claim(
        "Scaling the input-path gradient moves the tied matrix toward Input(U)",
        "cos(x_k, In) - cos(tied, In), orthogonal Procrustes, held out",
        "10k steps, x5: 0.222 - 0.216 = +0.006, in sample", 0.006,
    ),
    "C7b": Claim(
        "Scaling the input-path gradient moves the tied matrix away from Output(U)",
        "cos(x_k, Out) - cos(tied, Out), orthogonal Procrustes, held out",
        "10k steps, x5: 0.369 - 0.384 = -0.015, in sample", -0.015, direction="<",
    ),
}

# Calibrated C1 and C2 (tying.claims.calibrated_statistics): the claims pair's gap minus the mixture control's.
CALIBRATED = {"C1cal": "C1", "C2cal": "C2"}
CLAIMS |= {
    cal: Claim(f"{cid} calibrated: the tied matrix is more output-like than a half-input, half-output matrix",
               f"{cid}'s statistic minus the mixture control's (the row-normalised mean of a second untied run's "
               "input and output matrices as tied), paired by seed", "not in the paper", math.nan)
    for cal, cid in CALIBRATED.items()
}
ALL_TOKENS = "all analysed"  # the token_set of the all-token rows (tying.exposure adds comparable-token rows)

MD_COLUMNS = ["claim", "description", "paper", "ours", "interval", "on_claimed_side", "chance", "in_sample",
              "criterion", "needs", "testable", "verdict", "detail"]


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
    early = d[d["layer"] < np.ceil(n_blocks / 2)]
    means = early.groupby(["pair", "seed", *by, "role"])[value].mean().unstack("role")
    missing = {"tied", "untied"} - set(means.columns)
    if missing or means.isna().any().any():
        raise PipelineError(f"early-layer KL gap needs a tied and an untied model for every pair and seed ({lens} lens)")
    means = means.rename(columns={"tied": "tied_bits", "untied": "untied_bits"})
    means["gap_bits"] = means["tied_bits"] - means["untied_bits"]
    return means.reset_index()[["pair", "seed", *by, "tied_bits", "untied_bits", "gap_bits"]].rename_axis(columns=None)


def lens_statistic(lens, windows=None, reference=None, pair="main"):
    """C3: per-seed values (lens_gap), their interval over seeds and validation windows, and the lens
    certificate (tying.lens_certificate), whose failure makes the verdict "lens not converged".

    windows: the lens jobs' per-window frames (pair, role, seed, window, layer, kl_bits, kl_check_bits,
    check_step, steps); reference: the lens_convergence jobs' frames (pair, role, seed, layer,
    kl_budget_bits, kl_bits, change_bits, steps, reference_steps). Without windows: the seeds'
    t-interval and no certificate.
    """
    values = lens_gap(lens, pair)
    if windows is None:
        return Statistic(values)
    rows = only(windows, pair=pair)
    per_window = early_layer_gap(rows, lens=None, by=("window",)).pivot(index="window", columns="seed",
                                                                        values="gap_bits")
    mean, low, high, how = seed_window_interval(values, per_window)
    check = early_layer_gap(rows, lens=None, value="kl_check_bits").set_index("seed")["gap_bits"]
    ref = None
    if reference is not None:
        r = only(reference, pair=pair)
        gaps = [early_layer_gap(r, lens=None, value=v)["gap_bits"].iloc[0] for v in ("kl_bits", "kl_budget_bits")]
        ref = {"seed": int(r["seed"].iloc[0]), "steps": int(r["steps"].iloc[0]),
               "reference_steps": int(r["reference_steps"].iloc[0]), "gap": gaps[0], "budget_gap": gaps[1],
               "change": r.groupby("role")["change_bits"].agg(lambda c: c.abs().max()).to_dict()}
    passed, detail = certificate(values, check, int(rows["steps"].iloc[0]), int(rows["check_step"].iloc[0]),
                                 (high - low) / 2, ref)
    return Statistic(values, detail=detail, interval=(low, high, how), verdict="" if passed else NOT_CONVERGED)


def lens_gap(lens, pair="main"):
    """C3 per seed: early_layer_gap of the tuned lens metric (pair, role, seed, layer, lens, kl_bits) -> Series by seed."""
    return only(early_layer_gap(lens), pair=pair).set_index("seed")["gap_bits"]


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
            raise PipelineError(f"grad_flow metric ends at step {rows['step'].max()}, before the early window's "
                                f"step {steps}")
        rows = rows[rows["step"] <= steps]
    return rows.groupby("seed")[column].mean()


def norm_shape(norm_freq, pair="main", shuffles=NORM_SHUFFLES):
    """C6a, C6c and C6b per seed from shape_stats on the runs' draws -> Statistics (C6a, C6b, C6c).

    C6b's value is rise_and_fall minus the 95th percentile of its values with the seed's norms
    shuffled across tokens (`shuffles` times, seeded by the seed); its chance level is the shuffled
    values' mean on the same scale, its detail the peak bins' draws and the shuffled quantile
    (medians over seeds)."""
    flat, near, excess, chance, peaks, quantile = {}, {}, {}, {}, {}, {}
    for seed, rows in only(norm_freq, pair=pair).groupby("seed"):
        shape = shape_stats(rows)
        by_matrix = shape.set_index("matrix")
        flat[seed] = pick(by_matrix["spread"], "untied_input", "norm_freq")
        near[seed] = by_matrix.loc["untied_input", "drift"]
        null = shuffled_rise_fall(rows, shuffles, seed=int(seed))
        quantile[seed] = float(np.quantile(null, CHANCE_QUANTILE))
        excess[seed] = rise_and_fall(shape) - quantile[seed]
        chance[seed] = float(null.mean()) - quantile[seed]
        peaks[seed] = by_matrix["peak_count"]
    peak = pd.DataFrame(peaks).median(axis=1)
    detail = ("peak bin at ~" + ", ".join(f"{peak[m]:,.0f} draws ({m.replace('_', ' ')})"
                                          for m in ("untied_output", "tied"))
              + f"; shuffled norms' {CHANCE_QUANTILE:.0%} quantile {np.median(list(quantile.values())):.3f} "
              f"({shuffles} shuffles a seed)")
    flat, near, excess, chance = (pd.Series(v, dtype=float).rename_axis("seed") for v in (flat, near, excess, chance))
    return Statistic(flat), Statistic(excess, chance=chance, detail=detail), Statistic(near)


def scaling_shift(scaling, pair="main", variant="tied_x5", reference="input_u", step=None, scored="held_out",
                  target="true"):
    """C7a (reference input_u) or C7b (output_u) per seed: cos(x_k, reference) - cos(tied, reference)
    -> Series by seed."""
    rows = only(scaling, pair=pair, scored=scored, target=target, reference=reference)
    rows = at_step(rows[rows["variant"].isin(["tied", variant])], step)
    cos = rows.set_index(["seed", "variant"])["cosine"].unstack()
    return pick(cos, variant, "scaling") - pick(cos, "tied", "scaling")


def claim_statistics(alignment=None, knn=None, evolution=None, grad_flow=None, norm_freq=None,
                     scaling=None, lens=None, quality=None, *, pair="main", k=10, early_steps=None,
                     scaled_variant="tied_x5", lens_convergence=None, norm_shuffles=NORM_SHUFFLES,
                     lens_windows=None):
    """Statistic of every claim whose metric frame is given: {claim id: Statistic}.

    Frames are the tidy metric tables (`quality`: tying.model_quality's rows, claim LM; `lens`: the lens
    metric of both models of the pair; `lens_windows`, `lens_convergence`: the lens jobs' per-window KL and
    the reference lenses' checks, C3's interval and certificate); early_steps: the last step of "early
    training" for C5 (None: every logged step); norm_shuffles: C6b's chance level's shuffles.
    """
    out = {}
    if quality is not None:
        rows = only(quality, pair=pair)
        out["LM"] = Statistic(worst_margin(rows), detail=quality_detail(rows))
    if alignment is not None:
        out["C1"] = Statistic(
            alignment_gap(alignment, pair), in_sample=alignment_gap(alignment, pair, scored="in_sample"),
            chance=alignment_gap(alignment, pair, target="permuted"), per_token=_single(alignment_gap, alignment, pair),
        )
    if knn is not None:
        out["C2"] = Statistic(knn_gap(knn, pair, k), chance=knn_gap(knn, pair, k, column="null_overlap"),
                              per_token=_single(knn_gap, knn, pair, k))
    if lens is not None:
        out["C3"] = lens_statistic(lens, lens_windows, lens_convergence, pair)
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


def claims_report(frames, pairs, further=None, commits=None, paper_scale=None, *, k=10, early_steps=None,
                  scaled_variant="tied_x5", released=(), at_paper_scale=False, mixture=None,
                  norm_shuffles=NORM_SHUFFLES):
    """The claims table and its per-seed values -> (table, seeds), as results/tables/claims.* hold them.

    frames: {claim_statistics argument: tidy frame} of the first of `pairs`; further: {"alignment",
    "knn", and for trained pairs "quality": frames} of the pairs after it (C1, C2 and LM each); commits: the
    full commits of a released pair's tied and untied models; paper_scale: a paper-scale run's claims table,
    shown beside ours;
    at_paper_scale: the first pair is released models, so its numbers are the paper-scale ones; mixture: the
    further pair that is the mixture control, whose C1 and C2 calibrate the first pair's (C1cal, C2cal).
    """
    pair, *others = pairs
    statistics = claim_statistics(**frames, pair=pair, k=k, early_steps=early_steps, scaled_variant=scaled_variant,
                                  norm_shuffles=norm_shuffles)
    rows = ", ".join(sorted({r for f in frames.values() if "rows" in f.columns for r in f["rows"].unique()}))
    table = claims_table(statistics, one_pair=at_paper_scale, pair=pair).assign(rows=rows)
    if commits:  # released models: the short commits their numbers came from (tied, untied)
        table = table.assign(commits=" / ".join(c[:7] for c in commits))
    if paper_scale is not None:  # a paper-scale run's claims table
        table = with_paper_scale(table, paper_scale_values(paper_scale)).assign(
            **{f"paper_scale_{c}": paper_scale[c].iloc[0] if c in paper_scale.columns else ""
               for c in ("rows", "commits")})
    elif at_paper_scale:  # this run is the paper-scale one
        table = with_paper_scale(table, paper_scale_values(table)).assign(
            paper_scale_rows=rows, paper_scale_commits=table.get("commits", ""))
    seeds = seed_table(statistics).assign(pair=pair)
    if others:
        more, more_seeds = further_claims(further["alignment"], further["knn"], others, k, released,
                                          further.get("quality"))
        table, seeds = pd.concat([table, more], ignore_index=True), pd.concat([seeds, more_seeds], ignore_index=True)
    if mixture is not None:
        calibrated = calibrated_statistics(statistics, seed_statistics(seeds, mixture))
        table = pd.concat([table, claims_table(calibrated, pair=pair)], ignore_index=True)
        seeds = pd.concat([seeds, seed_table(calibrated).assign(pair=pair)], ignore_index=True)
    return table.assign(token_set=ALL_TOKENS), seeds.assign(token_set=ALL_TOKENS)


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


def further_claims(alignment, knn, pairs, k=10, released=(), quality=None):
    """C1 and C2 of each of `pairs` (claims pairs after the first: negative controls, other pairs), from
    their alignment and KNN metrics, and LM from the trained pairs' `quality` -> (claims_table rows with a
    pair column, seed_table rows)."""
    tables, seeds = [], []
    for pair in pairs:
        own = None if pair in released or quality is None else quality
        statistics = claim_statistics(alignment=alignment, knn=knn, quality=own, pair=pair, k=k)
        tables.append(claims_table(statistics, one_pair=pair in released, pair=pair))
        seeds.append(seed_table(statistics).assign(pair=pair))
    return pd.concat(tables, ignore_index=True), pd.concat(seeds, ignore_index=True)


def verdict(claim, values, low, high, one_pair=False):
    """The claim's verdict from its per-seed `values` and interval [low, high].

    Seeds: with fewer than MIN_SEEDS, "direction only (n seeds)"; else "holds" / "does not
    hold" / "inconclusive" from the interval. one_pair: a released pair's token-bootstrap
    interval, the verdict marked "(one pair of models)"; without an interval, "direction only".
    """
    n = int(pd.Series(values).notna().sum())
    if one_pair and (math.isnan(low) or math.isnan(high)):
        return "direction only (one pair of models)"
    if not one_pair and n < MIN_SEEDS:
        return f"direction only ({n} seed{'s' * (n != 1)})"
    low_side, high_side = claim.on_side(low), claim.on_side(high)
    other_side = (high < claim.threshold) if claim.direction == ">" else (low > claim.threshold)
    result = "holds" if low_side and high_side else "does not hold" if other_side else "inconclusive"
    return f"{result} (one pair of models)" if one_pair else result


def claims_table(statistics, one_pair=False, pair=None):
    """One row per claim in `statistics` ({claim id: Statistic or per-seed Series}), in CLAIMS order.

    one_pair: the statistics come from one released pair of models (no seeds): claims with
    per-token values get a token-bootstrap interval. pair: names the pair in a first column.
    """
    unknown = set(statistics) - set(CLAIMS)
    if unknown:
        raise PipelineError(f"unknown claim ids {sorted(unknown)}; known: {list(CLAIMS)}")
    rows = []
    for cid, claim in CLAIMS.items():
        if cid not in statistics:
            continue
        stat = statistics[cid] if isinstance(statistics[cid], Statistic) else Statistic(pd.Series(statistics[cid]))
        values = stat.values.dropna()
        n, on_side = len(values), int(claim.on_side(values).sum())
        if stat.interval is not None:  # its own interval (C3: over seeds and windows)
            mean, (low, high, interval) = float(values.mean()), stat.interval
        elif one_pair and stat.per_token is not None:
            mean, low, high = token_bootstrap_ci(stat.per_token)
            interval = f"95% bootstrap over {stat.per_token.notna().sum()} tokens, one pair of models"
        else:
            mean, low, high = mean_ci(values)
            interval = f"Student-t 95% over {n} seeds" if n > 1 else "none (one value)"
        row = {
            "claim": cid, "description": claim.description, "paper": claim.paper,
            "ours": format_cell(mean, low, high), "interval": interval,
            "on_claimed_side": f"{on_side} of {n} seed{'s' * (n != 1)}",
            "chance": _mean_text(stat.chance), "in_sample": _mean_text(stat.in_sample),
            "criterion": claim.criterion, "verdict": stat.verdict or verdict(claim, values, low, high, one_pair), "detail": stat.detail,
            "mean": mean, "ci_low": low, "ci_high": high, "n_seeds": n, "seeds_on_side": on_side,
            "in_sample_mean": _mean(stat.in_sample), "paper_value": claim.paper_value,
        }
        rows.append(row)
    table = pd.DataFrame(rows)
    if pair is not None:
        table.insert(0, "pair", pair)
    return table


def with_paper_scale(table, paper_scale):
    """`table` with columns paper_scale (text), paper_scale_mean and paper_scale_differs
    (|paper-scale - paper| > the claim's tolerance; NA without one) from {claim id: value}."""
    columns = [_paper_scale_columns(CLAIMS[cid], paper_scale.get(cid, math.nan)) for cid in table["claim"]]
    return pd.concat([table, pd.DataFrame(columns, index=table.index)], axis=1).astype(
        {"paper_scale_differs": "boolean"})


def paper_scale_values(table):
    """{claim id: value comparable with the paper's} from a claims table (its first pair's rows): in
    sample where measured."""
    if "pair" in table.columns:
        table = table[table["pair"] == table["pair"].iloc[0]]
    in_sample = table["in_sample_mean"] if "in_sample_mean" in table.columns else pd.Series(math.nan, table.index)
    return dict(zip(table["claim"], in_sample.fillna(table["mean"])))


def seed_table(statistics):
    """Tidy per-seed values of every claim: claim, seed, value, in_sample, chance."""
    frames = []
    for cid, stat in statistics.items():
        frame = pd.DataFrame({"value": stat.values})
        for name in ("in_sample", "chance"):
            extra = getattr(stat, name)
            frame[name] = math.nan if extra is None else extra.reindex(frame.index)
        frames.append(frame.rename_axis("seed").reset_index().assign(claim=cid))
    columns = ["claim", "seed", "value", "in_sample", "chance"]
    return pd.concat(frames, ignore_index=True)[columns] if frames else pd.DataFrame(columns=columns)


def _paper_scale_columns(claim, value):
    comparable = not (math.isnan(value) or math.isnan(claim.paper_value) or math.isnan(claim.tolerance))
    return {
        "paper_scale": format_cell(value, math.nan, math.nan), "paper_scale_mean": value,
        "paper_scale_differs": abs(value - claim.paper_value) > claim.tolerance if comparable else pd.NA,
    }


def write_claims(table, seeds, parquet_path, md_path, seeds_path):
    """results/tables/claims.{parquet,md} and the per-seed values: every column to Parquet,
    the readable ones to Markdown."""
    write_parquet(table, parquet_path)
    write_parquet(seeds, seeds_path)
    extra = [c for c in ("commits", "paper_scale", "paper_scale_differs", "paper_scale_rows", "paper_scale_commits")
             if c in table.columns]
    with atomic_path(md_path) as tmp:
        shown = [c for c in MD_COLUMNS[:1] + ["token_set"] * ("token_set" in table.columns) + MD_COLUMNS[1:]
                 if c in table.columns]
        tmp.write_text(markdown(table, ["pair"] * ("pair" in table.columns) + shown + extra))


def _mean(values):
    return math.nan if values is None or values.dropna().empty else float(values.mean())


def _mean_text(values):
    mean = _mean(values)
    return "" if math.isnan(mean) else f"{mean:.3f}"


def _single(gap, frame, *args):
    """Per-token values of `gap` when the frame holds one seed (a released pair), else None."""
    return gap(frame, *args, per_token=True) if frame["seed"].nunique() == 1 else None


def _one_seed(rows):
    if rows["seed"].nunique() != 1:
        raise PipelineError("per-token claim values need exactly one seed")
    return rows



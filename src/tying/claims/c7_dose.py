"""C7 as a dose-response: the tied matrix's move toward Input(U) and away from Output(U) over the input-path
gradient scale, beside what each scale does to the gradient and to the language model.

"Less output-fitted" and "more input-shaped" predict different curves over the dose: a tied matrix that only
loses its output fit moves away from Output(U) ever faster with the dose while C7a stays near zero; one that
becomes input-shaped moves toward Input(U) as the dose grows. A larger dose also leaves a worse language model,
and a worse model's matrix is less output-fitted whatever its dose. Per dose (a tied variant and its
input_grad_scale; the plain tied run is dose 1, where the C7 measures are 0 by definition), per seed, then the
claims table's Student-t 95% interval over seeds:

- C7a, C7b: held-out Procrustes cosine to Input(U), Output(U) of the dose's run minus the tied run's at the same
  step (tying.claims.statistics.scaling_shift), and C7a of the permuted targets (its chance level);
- C7a_norm, C7b_norm: C7a and C7b over their ceilings, the cosine a second untied run's input matrix reaches to
  Input(U) and its output matrix to Output(U) after the same map (tying.metrics.alignment.ceiling_frame): the
  two moves on one scale, each as a share of the way a matrix trained for that role gets;
- C7a_equal, C7b_equal: the dose's run against the tied run at the same margin over its bigram table, in place
  of the same step: the tied run's cosines at its checkpoints, interpolated linearly in margin to the dose's
  final margin (NaN where the dose's model is better than the tied run ever got); equal_step, the tied step
  interpolated the same way;
- in_share: the input (lookup) path's share of the embedding gradient, g_in / (g_in + g_out) with g_in after
  the scale, averaged over every training step (the runs' provenance);
- margin: the run's last validation loss minus its bigram table's (tying.metrics.model_quality): below 0
  predicts better than the table.
"""

import math

import numpy as np
import pandas as pd

from tying.claims.statistics import scaling_shift
from tying.frames import at_step, only, write_table
from tying.stats import format_cell, mean_ci

REFERENCES = {"C7a": "input_u", "C7b": "output_u"}
RELATIVE = ("C7a", "C7a_chance", "C7b", "C7a_norm", "C7b_norm", "C7a_equal", "C7b_equal")  # 0 for the tied run
SHOWN = [
    "variant",
    "dose",
    "seeds",
    "C7a",
    "C7a_chance",
    "C7b",
    "C7a_norm",
    "C7b_norm",
    "C7a_equal",
    "C7b_equal",
    "equal_step",
    "in_share",
    "margin",
]


def dose_seed_values(scaling, quality, provenance, doses, pair="main", reference=None):
    """Per (variant, seed) values of each measure -> frame variant, dose, seed, measure, value.

    scaling, quality: the pair's scaling and quality metrics (every seed, the tied run's quality at every
    checkpoint); provenance: {(variant, seed): that run's training provenance (step, g_in, g_out, ...)}; doses:
    {variant: input_grad_scale}, the tied variant among them; reference: the c7_dose_reference metric (every seed:
    kind "ceiling", and kind "tied" per checkpoint step), for the normalised and equal-margin measures (None:
    without them).
    """
    rows = []
    for variant, dose in doses.items():
        measures = _measures(scaling, quality, provenance, variant, pair)
        if reference is not None:
            measures |= _referenced(scaling, quality, reference, variant, pair, measures)
        for measure, values in measures.items():
            rows += [
                {"variant": variant, "dose": float(dose), "seed": int(s), "measure": measure, "value": float(v)}
                for s, v in values.items()
            ]
    return pd.DataFrame(rows)


def _measures(scaling, quality, provenance, variant, pair):
    seeds = sorted(s for v, s in provenance if v == variant)
    shift = (
        {}
        if variant == "tied"
        else {  # the tied run is C7's reference: 0 by definition (dose_table)
            f"{cid}{suffix}": scaling_shift(scaling, pair, variant, reference, target=target)
            for cid, reference in REFERENCES.items()
            for suffix, target in (("", "true"), ("_chance", "permuted"))
            if cid == "C7a" or not suffix
        }
    )
    in_share = pd.Series({s: _input_share(provenance[(variant, s)]) for s in seeds})
    return shift | {"in_share": in_share, "margin": _final_margins(quality, variant)}


def _final_margins(quality, variant):
    """Per seed, a run's margin at its last step."""
    return at_step(only(quality, variant=variant), by=("seed",)).groupby("seed")["margin"].mean()


def _referenced(scaling, quality, reference, variant, pair, measures):
    """The normalised and equal-margin measures of one dose (the tied run: its equal step alone)."""
    held = only(reference, pair=pair, scored="held_out", target="true")
    if variant == "tied":
        return {"equal_step": at_step(only(quality, variant="tied"), by=("seed",)).groupby("seed")["step"].max()}
    ceiling = only(held, kind="ceiling").set_index(["seed", "reference"])["cosine"].unstack()
    out = {f"{cid}_norm": measures[cid] / ceiling[ref] for cid, ref in REFERENCES.items()}
    final = at_step(only(scaling, pair=pair, scored="held_out", target="true", variant=variant))
    final = final.set_index(["seed", "reference"])["cosine"].unstack()
    tied_margins = only(quality, variant="tied").set_index(["seed", "step"])["margin"]
    tied_cosines = only(held, kind="tied").set_index(["seed", "step", "reference"])["cosine"].unstack()
    equal = {f"{cid}_equal": {} for cid in REFERENCES} | {"equal_step": {}}
    for seed, margin in measures["margin"].items():
        margins = tied_margins.loc[seed]
        cosines = tied_cosines.loc[seed].reindex(margins.index)
        step, weights = at_margin(margins, margin)
        equal["equal_step"][seed] = step
        used = weights != 0
        for cid, ref in REFERENCES.items():
            tied = (weights[used] * cosines[ref].to_numpy()[used]).sum() if used.any() else math.nan
            equal[f"{cid}_equal"][seed] = final.loc[seed, ref] - tied
    return out | {name: pd.Series(values) for name, values in equal.items()}


def at_margin(margins, margin):
    """Where a run's margins over its checkpoints (Series by step, ascending) reach `margin`, by linear
    interpolation on the latest segment between two checkpoints that brackets it -> (step, weights): the
    interpolated step and the weights over the checkpoints that give any per-checkpoint value there. Where no
    segment brackets it (a model better than the run ever got): (NaN, all weights 0)."""
    steps, values = margins.index.to_numpy(), margins.to_numpy()
    weights = np.zeros(len(values))
    for i in range(len(values) - 2, -1, -1):
        low, high = sorted((values[i], values[i + 1]))
        if low <= margin <= high:
            t = 0.0 if values[i] == values[i + 1] else (values[i] - margin) / (values[i] - values[i + 1])
            weights[i], weights[i + 1] = 1 - t, t
            return float(steps[i] + t * (steps[i + 1] - steps[i])), weights
    return math.nan, weights


def _input_share(provenance):
    """Mean over steps of the input path's share of the embedding gradient (after the scale)."""
    return float((provenance["g_in"] / (provenance["g_in"] + provenance["g_out"])).mean())


def dose_table(seed_values):
    """One row per dose, in ascending dose: each measure's mean, Student-t 95% interval (columns <measure>,
    <measure>_mean, _low, _high) and the seeds it has; the tied run's C7 cells read 0, its reference."""
    rows = []
    present = set(seed_values["measure"])
    for (variant, dose), group in seed_values.groupby(["variant", "dose"], sort=False):
        row = {"variant": variant, "dose": dose, "seeds": group["seed"].nunique()}
        if variant == "tied":
            row |= {
                k: v
                for m in RELATIVE
                if m in present
                for k, v in ((m, "0 (reference)"), (f"{m}_mean", 0.0), (f"{m}_low", math.nan), (f"{m}_high", math.nan))
            }
        for measure, values in group.groupby("measure", sort=False)["value"]:
            mean, low, high = mean_ci(values.to_numpy())
            row |= {
                measure: format_cell(mean, low, high, digits=0 if measure == "equal_step" else 3),
                f"{measure}_mean": mean,
                f"{measure}_low": low,
                f"{measure}_high": high,
            }
        rows.append(row)
    return pd.DataFrame(rows).sort_values("dose", ignore_index=True)


def write_dose_table(table, csv_path, md_path):
    """results/tables/c7_dose.{csv,md}: every column to CSV, the formatted cells to Markdown, and what the
    curve's intervals say (`curve_text`)."""
    write_table(table, csv_path, md_path, SHOWN, shown=table.fillna(""), notes="\n" + curve_text(table) + "\n")


def curve_text(table):
    """What the dose curve's intervals allow one to say: per C7 measure, the doses whose interval lies above 0,
    below 0, or crosses it; then which account the largest dose supports, at the same step and, where the table
    has it, at the same margin (`supports`)."""
    lines = []
    doses = table[table["variant"] != "tied"]
    for measure in ("C7a", "C7b", "C7a_norm", "C7b_norm", "C7a_equal", "C7b_equal"):
        if f"{measure}_mean" not in doses.columns:
            continue
        sides = {"above 0": [], "below 0": [], "crossing 0": [], "not measured": []}
        for row in doses.itertuples():
            low, high = getattr(row, f"{measure}_low"), getattr(row, f"{measure}_high")
            side = (
                "not measured" if math.isnan(low) else "above 0" if low > 0 else "below 0" if high < 0 else "crossing 0"
            )
            sides[side].append(f"x{row.dose:g}")
        lines.append(f"- {measure}: " + "; ".join(f"{side} at {', '.join(d)}" for side, d in sides.items() if d))
    lines.append(
        f"\nAt the largest dose, x{table['dose'].iloc[-1]:g}, at the same step the curve supports: "
        f"{supports(table)}"
        + (f"; at the same margin: {supports(table, '_equal')}" if "C7a_equal_mean" in table.columns else "")
        + "."
    )
    return "\n".join(lines)


def supports(table, suffix=""):
    """Which account the curve supports, from the largest dose's intervals of C7a<suffix> and C7b<suffix>: 'more
    input-shaped' where C7a's lies above 0, 'less output-fitted' where only C7b's lies below 0, else 'neither'
    ('not measured' where the largest dose has no equal-margin value)."""
    top = table.iloc[-1]
    low, high = top[f"C7a{suffix}_low"], top[f"C7b{suffix}_high"]
    if math.isnan(top[f"C7a{suffix}_mean"]):
        return "not measured"
    if low > 0:
        return "more input-shaped"
    return "less output-fitted" if high < 0 else "neither"

"""C7 as a dose-response: the tied matrix's move toward Input(U) and away from Output(U) over the input-path
gradient scale, beside what each scale does to the gradient and to the language model.

"Less output-fitted" and "more input-shaped" predict different curves over the dose: a tied matrix that only
loses its output fit moves away from Output(U) ever faster with the dose while C7a stays near zero; one that
becomes input-shaped moves toward Input(U) as the dose grows. Per dose (a tied variant and its
input_grad_scale; the plain tied run is dose 1, where C7a and C7b are 0 by definition), per seed, then the
claims table's Student-t 95% interval over seeds:

- C7a, C7b: held-out Procrustes cosine to Input(U), Output(U) of the dose's run minus the tied run's
  (tying.claims.statistics.scaling_shift), and C7a of the permuted targets (its chance level);
- in_share: the input (lookup) path's share of the embedding gradient, g_in / (g_in + g_out) with g_in after
  the scale, averaged over every training step (the runs' provenance);
- margin: the run's last validation loss minus its bigram table's (tying.metrics.model_quality): below 0
  predicts better than the table.
"""
import math

import pandas as pd

from tying.claims.statistics import scaling_shift
from tying.frames import at_step, only, write_table
from tying.stats import format_cell, mean_ci

MEASURES = ("C7a", "C7b", "in_share", "margin")
SHOWN = ["variant", "dose", "seeds", "C7a", "C7a_chance", "C7b", "in_share", "margin"]


def dose_seed_values(scaling, quality, provenance, doses, pair="main"):
    """Per (variant, seed) values of each measure -> frame variant, dose, seed, measure, value.

    scaling, quality: the pair's scaling and quality metrics (every seed); provenance: {(variant, seed): that
    run's training provenance (step, g_in, g_out, ...)}; doses: {variant: input_grad_scale}, the tied variant
    among them.
    """
    rows = []
    for variant, dose in doses.items():
        for measure, values in _measures(scaling, quality, provenance, variant, pair).items():
            rows += [{"variant": variant, "dose": float(dose), "seed": int(s), "measure": measure, "value": float(v)}
                     for s, v in values.items()]
    return pd.DataFrame(rows)


def _measures(scaling, quality, provenance, variant, pair):
    seeds = sorted(s for v, s in provenance if v == variant)
    shift = {} if variant == "tied" else {  # the tied run is C7's reference: 0 by definition (dose_table)
        f"{cid}{suffix}": scaling_shift(scaling, pair, variant, reference, target=target)
        for cid, reference in (("C7a", "input_u"), ("C7b", "output_u"))
        for suffix, target in (("", "true"), ("_chance", "permuted")) if cid == "C7a" or not suffix}
    in_share = pd.Series({s: _input_share(provenance[(variant, s)]) for s in seeds})
    runs = at_step(only(quality, variant=variant), by=("seed",))
    return shift | {"in_share": in_share, "margin": runs.groupby("seed")["margin"].mean()}


def _input_share(provenance):
    """Mean over steps of the input path's share of the embedding gradient (after the scale)."""
    return float((provenance["g_in"] / (provenance["g_in"] + provenance["g_out"])).mean())


def dose_table(seed_values):
    """One row per dose, in ascending dose: each measure's mean, Student-t 95% interval (columns <measure>,
    <measure>_mean, _low, _high) and the seeds it has; the tied run's C7 cells read 0, its reference."""
    rows = []
    for (variant, dose), group in seed_values.groupby(["variant", "dose"], sort=False):
        row = {"variant": variant, "dose": dose, "seeds": group["seed"].nunique()}
        if variant == "tied":
            row |= {k: v for m in ("C7a", "C7a_chance", "C7b") for k, v in
                    ((m, "0 (reference)"), (f"{m}_mean", 0.0), (f"{m}_low", math.nan), (f"{m}_high", math.nan))}
        for measure, values in group.groupby("measure", sort=False)["value"]:
            mean, low, high = mean_ci(values.to_numpy())
            row |= {measure: format_cell(mean, low, high), f"{measure}_mean": mean, f"{measure}_low": low,
                    f"{measure}_high": high}
        rows.append(row)
    return pd.DataFrame(rows).sort_values("dose", ignore_index=True)


def write_dose_table(table, csv_path, md_path):
    """results/tables/c7_dose.{csv,md}: every column to CSV, the formatted cells to Markdown, and which account
    the largest dose supports (`supports`)."""
    note = f"\nAt the largest dose, x{table['dose'].iloc[-1]:g}, the curve supports: {supports(table)}.\n"
    write_table(table, csv_path, md_path, SHOWN, shown=table.fillna(""), notes=note)


def supports(table):
    """Which account the curve supports, from the largest dose's intervals: 'more input-shaped' where its
    C7a interval lies above 0, 'less output-fitted' where only its C7b interval lies below 0, else 'neither'."""
    top = table.iloc[-1]
    if top["C7a_low"] > 0:
        return "more input-shaped"
    return "less output-fitted" if top["C7b_high"] < 0 else "neither"

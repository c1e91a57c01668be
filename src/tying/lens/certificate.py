"""C3's interval over seeds and validation windows, and the certificate that its lenses have converged.

C3 (tying.claims.statistics.early_layer_gap) is a difference of held-out KLs, scored on every validation window
(tying.lens.scoring.window_kl), the same windows for every seed. Its interval has two parts: the seeds'
Student-t interval (the spread of training and lens fitting on this text) and a percentile bootstrap
over windows of the seed-averaged per-window gap (which text was scored), their half-widths added in
quadrature.

The certificate has two checks; a failed one makes C3's verdict "lens not converged":
- along training, every seed: C3 from the lens at tying.lens.fitting.CHECK_FRACTION of its steps and at the
  end differ by at most `gap_limit`: a quarter of C3's interval half-width, never below TOLERANCE bits;
- the reference, on the claims pair's first seed: a lens trained for tying.lens.jobs.REFERENCE_FACTOR
  times the budget, whose held-out KL at every state is within state_limit of the budget lens's KL there
  (TOLERANCE bits, or STATE_SHARE of that KL where it is larger), and whose C3 is within a quarter of C3's
  interval half-width of the budget's C3. The question is whether more lens training would change the claim:
  a fixed limit alone is too strict once states carry bits of KL and too loose when they carry hundredths.
"""

import math

import numpy as np
import pandas as pd

from tying.stats import mean_ci, token_bootstrap_ci

TOLERANCE = 0.005  # bits: C3 along training, and the least a state's held-out KL may move
STATE_SHARE = 0.01  # of a state's held-out KL: how far the reference may move it, where above TOLERANCE
REFERENCE_SHARE = 0.25  # of C3's interval half-width: how far C3 may move along training or under the reference
NOT_CONVERGED = "lens not converged"


def state_limit(kl_bits):
    """How far the reference lens may move a state whose budget lens scores `kl_bits` (a scalar or array)."""
    return np.maximum(TOLERANCE, STATE_SHARE * np.asarray(kl_bits))


def gap_limit(half_width):
    """How far C3 may move along a lens's training: REFERENCE_SHARE of its interval half-width, at least
    TOLERANCE bits (TOLERANCE alone where there is no interval, NaN)."""
    return TOLERANCE if math.isnan(half_width) else max(TOLERANCE, REFERENCE_SHARE * half_width)


def worst_state(reference):
    """{role: (layer, |change|, limit)} of the state whose reference change is largest against its limit.

    reference: one seed's lens_convergence rows (role, layer, kl_budget_bits, change_bits)."""
    ratio = reference["change_bits"].abs() / state_limit(reference["kl_budget_bits"])
    rows = reference.loc[ratio.groupby(reference["role"]).idxmax()]
    return {r.role: (int(r.layer), abs(r.change_bits), float(state_limit(r.kl_budget_bits))) for r in rows.itertuples()}


def seed_window_interval(values, per_window):
    """C3's mean and 95% interval from its per-seed values and per-window gaps.

    values: C3 by seed (each the mean over the same validation windows); per_window: the gap per
    (window, seed), windows x seeds. Returns (mean, low, high, how it was computed): the seeds'
    Student-t half-width and the window bootstrap's half-width in quadrature; one seed, the window
    bootstrap alone.
    """
    values = pd.Series(values).dropna()
    mean, t_low, t_high = mean_ci(values)
    _, w_low, w_high = token_bootstrap_ci(per_window[values.index].mean(axis=1))
    windows, w_half = len(per_window), (w_high - w_low) / 2
    if len(values) == 1:
        return mean, mean - w_half, mean + w_half, f"95% bootstrap over {windows} validation windows, one seed"
    half = math.hypot((t_high - t_low) / 2, w_half)
    return (
        mean,
        mean - half,
        mean + half,
        f"Student-t 95% over {len(values)} seeds and 95% bootstrap over {windows} validation windows, "
        "half-widths in quadrature",
    )


def certificate(end, check, steps, check_step, half_width, reference=None, name="C3"):
    """Whether C3's lenses are converged, and the detail that says why: (passed, text).

    end, check: C3 by seed from the lenses at the end of their `steps` (0: lenses the pair names, which pass
    with that said) and at `check_step`;
    half_width: C3's interval half-width (NaN: none, the reference's C3 is then not checked);
    reference: None (the pair trains none: the along-training check alone), or {"seed", "steps",
    "reference_steps", "states": worst_state's {role: (layer, |change|, limit)}, "gap": reference C3,
    "budget_gap": the budget's C3 on that seed}; name: the statistic the text names (C3, or C3s0: the same
    checks on the state-0 gap).
    """
    if steps == 0:
        return True, (
            "given: the pair names its lenses (tuned-lens folders), not trained here, so neither check applies"
        )
    moved, along_limit = (end - check).dropna(), gap_limit(half_width)
    along = bool((moved.abs() <= along_limit).all())
    parts = [
        f"along training ({check_step} -> {steps} steps), {name} change by seed "
        + ", ".join(f"{seed}: {value:+.4f}" for seed, value in moved.items())
        + f" (limit {along_limit:.4f})"
    ]
    passed = along
    if reference is None:
        parts.append("no 4x reference for this pair (its lens_reference is false)")
    else:
        states = all(change <= limit for _, change, limit in reference["states"].values())
        shift, limit = reference["gap"] - reference["budget_gap"], REFERENCE_SHARE * half_width
        gap_ok = math.isnan(limit) or abs(shift) <= limit
        passed = passed and states and gap_ok
        limit_text = "no interval" if math.isnan(limit) else f"limit {limit:.4f}, a quarter of the half-width"
        factor = reference["reference_steps"] // max(reference["steps"], 1)
        parts.insert(
            0,
            f"{factor}x reference (seed {reference['seed']}, "
            f"{reference['steps']} -> {reference['reference_steps']} steps): states' largest "
            "|change| against its limit, "
            + ", ".join(
                f"{role} state {layer} {change:.4f} bits (limit {limit:.4f})"
                for role, (layer, change, limit) in reference["states"].items()
            )
            + f", {name} {shift:+.4f} ({limit_text})",
        )
    return passed, ("certified: " if passed else "not certified: ") + "; ".join(parts)

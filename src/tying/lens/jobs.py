"""The lens rules' work: a lens job (fit, score, its own convergence check, the model's state-0 floors) and the
4x reference lens that certifies C3 (tying.lens.certificate)."""

from tying.data.tokens import load_ids
from tying.lens.fitting import check_step, recipe, train_lens
from tying.lens.floor import state0_floors
from tying.lens.scoring import convergence, early_states, scoring_args, state_means, window_kl
from tying.lens.translators import copy_lens
from tying.lens.unembed import Readout, lens_placement
from tying.train.models import frozen_model

REFERENCE_FACTOR = 4  # the reference lens (lens_convergence) trains for this many times lens.steps


def load_job(files, cfg):
    """A lens job's frozen model, placed by `lens_placement` from the config's lens.device and lens.dtype,
    and its train and val token arrays: `files` maps model, train, val and meta to paths."""

    device, dtype = lens_placement(cfg["device"], cfg["dtype"])
    return (
        frozen_model(files["model"], device=device, dtype=dtype),
        load_ids(files["train"], files["meta"]),
        load_ids(files["val"], files["meta"]),
    )


def lens_job(model, train, val, cfg, *, seed):
    """A lens job: the config's lens, its held-out KL, and its own convergence check.

    The lens trains for lens.steps; at CHECK_FRACTION of them a copy of its translators is kept, and
    both are scored on the validation windows (the copy at C3's early states only, `early_states`).
    Returns (lens, `evaluate_lens` frame, windows frame: window, layer, kl_bits of the tuned lens at
    the end and kl_check_bits at the check (NaN past the early states), check_step, steps).
    """
    steps = cfg["steps"]
    check_at, kept = check_step(steps), {}
    keep = lambda step, lens: kept.setdefault("lens", copy_lens(lens)) if step == check_at else None
    lens = train_lens(model, train, **recipe(cfg), seed=seed, on_step=keep)
    early = early_states(model.config.num_hidden_layers)
    windows = window_kl(model, lens, val, **scoring_args(cfg), more={"check": (kept.get("lens", lens), early)})
    tuned, check = (windows[windows["lens"] == name].drop(columns="lens") for name in ("tuned", "check"))
    per_window = tuned.merge(check.rename(columns={"kl_bits": "kl_check_bits"}), on=["window", "layer"], how="left")
    frame = state_means(windows[windows["lens"] != "check"])
    return lens, frame, per_window.assign(check_step=check_at if steps else 0, steps=steps)


def with_floors(frame, model, val, cfg):
    """A lens job's metric `frame` with the model's state-0 floors on the windows it was scored on
    (tying.lens.floor.state0_floors): columns floor_bits and readout_floor_bits, the same on every row."""
    return frame.assign(**state0_floors(model, Readout(model), val, **scoring_args(cfg)))


def reference_check(model, train, val, cfg, budget, *, seed):
    """C3's certificate on one model: a reference lens trained for REFERENCE_FACTOR times lens.steps (the
    same recipe and seed), scored on the same validation windows as the lens job's `budget` frame.
    Returns `convergence`'s frame with steps and reference_steps."""
    steps = REFERENCE_FACTOR * cfg["steps"]
    lens = train_lens(model, train, **{**recipe(cfg), "steps": steps}, seed=seed)
    reference = state_means(window_kl(model, lens, val, **scoring_args(cfg), logit=False))
    return convergence(budget, reference).assign(steps=cfg["steps"], reference_steps=steps)

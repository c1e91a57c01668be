"""The lens procedures C3 is measured under, each a recipe for `tying.lens.fitting.train_lens`.

- "logit": no training. Zero steps leave the translators at their zero start, which reads every state
  through the model's own readout as it is: the logit lens.
- "tuned_lens": tuned-lens's optimiser, as the package's `train` command sets it by default and the paper's
  authors ran it (their `experiments/2_tuned_lens/train_olmo_lens.sh`: `python -m tuned_lens train` with
  `--num_steps 500 --tokens_per_step 131072` and nothing else set), at the sweep's batch. From the package's
  source: `scripts/ingredients.py`'s `Optimizer` (optimizer "sgd"; lr_scale 1.0 of SGD's default 1.0, the torch
  lr being lr * (1 - momentum); momentum 0.9; Nesterov; weight_decay 1e-3; warmup_steps None, which is 0 for
  SGD; the schedule `get_linear_schedule_with_warmup(opt, 0, num_steps)`, linear to 0 over the budget) and
  `scripts/train_loop.py`'s `Train` (`clip_grad_norm_(lens.parameters(), 1.0)` before each step, translators
  zero at the start), in plain coordinates. The batch is not the package's: it trains on 2^18 tokens a step
  (tokens_per_step), the authors' lenses on 131,072 (tying.paper.LENS_BUDGETS), these on lens.batch_size (or
  lens_budget.batch_sizes) windows of lens.seq_len tokens.
- "certified": the config's own `lens:` recipe, the one C3's certificate checks (tying.lens.certificate).
"""

from tying.errors import PipelineError
from tying.lens.fitting import recipe

TUNED_LENS = {
    "optimizer": "sgd",
    "lr": 1.0,
    "momentum": 0.9,
    "weight_decay": 1e-3,
    "grad_clip": 1.0,
    "schedule": "linear",
    "whiten": False,
    "fisher": False,
}
PROCEDURES = ("logit", "tuned_lens", "certified")
NAMES = {"logit": "the logit lens", "tuned_lens": "tuned-lens's optimiser", "certified": "the certified recipe"}


def procedure_text(name, cfg, batch_size=None):
    """What procedure `name` is, for a table's reader: its optimiser and its tokens a step (batch_size windows,
    default lens.batch_size, of lens.seq_len tokens)."""
    batch = batch_size or cfg["batch_size"]
    per_step = f"at {batch * cfg['seq_len']:,} tokens a step ({batch} windows of {cfg['seq_len']})"
    if name == "logit":
        return "the logit lens: the model's own readout of each state, no training"
    if name == "tuned_lens":
        return (
            f"tuned-lens's optimiser ({TUNED_LENS['optimizer'].upper()}, Nesterov, lr {TUNED_LENS['lr']:g}, "
            f"{TUNED_LENS['schedule']} decay) {per_step}"
        )
    coordinates = ("whitened on both sides" if cfg["fisher"] else "whitened inputs") if cfg["whiten"] else "plain"
    return (
        f"this config's certified recipe ({cfg['optimizer']}, lr {cfg['lr']:g}, {coordinates} translators, "
        f"tying.lens.fitting's restart schedule) {per_step}"
    )


def procedure_recipe(name, cfg, steps):
    """train_lens's keyword arguments for procedure `name` at `steps` (the logit lens: 0), on the windows
    (batch_size x seq_len) and readout precision of the config's `lens:` section `cfg`."""
    if name not in PROCEDURES:
        raise PipelineError(f"unknown lens procedure {name!r}; one of {', '.join(PROCEDURES)}")
    base = {**recipe(cfg), "schedule": "restart"}
    if name == "logit":
        return {**base, "steps": 0, "whiten": False, "fisher": False}
    return {**base, **(TUNED_LENS if name == "tuned_lens" else {}), "steps": steps}

"""The lens procedures C3 is measured under, each a recipe for `tying.lens.fitting.train_lens`.

- "logit": no training. Zero steps leave the translators at their zero start, which reads every state
  through the model's own readout as it is: the logit lens.
- "tuned_lens": tuned-lens 0.2's `train` command with its defaults, as the paper's authors ran it (their
  `experiments/2_tuned_lens/train_olmo_lens.sh`: `python -m tuned_lens train` with `--num_steps 500
  --tokens_per_step 131072` and nothing else set). From the package's source: `scripts/ingredients.py`'s
  `Optimizer` (optimizer "sgd"; lr_scale 1.0 of SGD's default 1.0, the torch lr being lr * (1 - momentum);
  momentum 0.9; Nesterov; weight_decay 1e-3; warmup_steps None, which is 0 for SGD; the schedule
  `get_linear_schedule_with_warmup(opt, 0, num_steps)`, linear to 0 over the budget) and
  `scripts/train_loop.py`'s `Train` (num_steps 250, tokens_per_step 2**18, `clip_grad_norm_(lens.parameters(),
  1.0)` before each step, translators zero at the start), in plain coordinates. Its budgets, the package's
  and the authors': tying.paper.LENS_BUDGETS.
- "certified": the config's own `lens:` recipe, the one C3's certificate checks (tying.lens.certificate).
"""
from tying.errors import PipelineError
from tying.lens.fitting import recipe

TUNED_LENS = {"optimizer": "sgd", "lr": 1.0, "momentum": 0.9, "weight_decay": 1e-3, "grad_clip": 1.0,
              "schedule": "linear", "whiten": False, "fisher": False}
PROCEDURES = ("logit", "tuned_lens", "certified")


def procedure_recipe(name, cfg, steps):
    """train_lens's keyword arguments for procedure `name` at `steps` (the logit lens: 0), on the windows
    (batch_size x seq_len) and readout precision of the config's `lens:` section `cfg`."""
    if name not in PROCEDURES:
        raise PipelineError(f"unknown lens procedure {name!r}; one of {', '.join(PROCEDURES)}")
    base = {**recipe(cfg), "schedule": "restart"}
    if name == "logit":
        return {**base, "steps": 0, "whiten": False, "fisher": False}
    return {**base, **(TUNED_LENS if name == "tuned_lens" else {}), "steps": steps}

"""AdamW's decoupled weight decay on its own, under a run's own learning-rate schedule (tying.plan.run_spec).

Each step multiplies every decayed parameter by 1 - lr_t * wd before the gradient's update, and
tying.train.loop.build decays every matrix (ndim >= 2), the embeddings included. A row that no gradient
reaches (a token never looked up, an Adam update of exactly zero) therefore ends at prod_t (1 - lr_t * wd)
of its start: its no-gradient level is 1 - prod_t (1 - lr_t * wd), the shrinkage that decay alone
produces. The total decay wd * sum_t lr_t is the regime's decay in one number (the paper's 10k-step
1B config: 0.164).
"""

import dataclasses
import json
import math
from pathlib import Path

from tying.plan.run_spec import RunSpec, lr_lambda

RECORD = "training.json"


def learning_rates(spec, steps=None):
    """The lr of each of the first `steps` optimizer steps (default spec.steps) -> list of floats.

    The loop's LambdaLR starts at factor(0) and steps after each update, so update t (from 1) uses
    spec.lr * factor(t - 1)."""
    factor = lr_lambda(spec)
    return [spec.lr * factor(t) for t in range(spec.steps if steps is None else steps)]


def total_decay(spec, steps=None):
    """wd * sum of the lr over the first `steps` updates (default all of them)."""
    return spec.weight_decay * math.fsum(learning_rates(spec, steps))


def no_gradient_level(spec, steps=None):
    """1 - prod_t (1 - lr_t * wd) over the first `steps` updates (default all): the relative shrinkage of
    a decayed row that no gradient reaches."""
    return 1.0 - math.prod(1.0 - lr * spec.weight_decay for lr in learning_rates(spec, steps))


def weight_decay_for(spec, target):
    """The weight decay whose total decay over spec's schedule (lr, warmup, min_lr_ratio, steps) is `target`:
    the total is linear in the decay."""
    return target / total_decay(dataclasses.replace(spec, weight_decay=1.0))


def checkpoint_level(directory):
    """no_gradient_level of the run that exported checkpoint `directory`, up to the checkpoint's step, from
    its training record; NaN for a checkpoint with none (a released model: its schedule is not recorded)."""
    record = Path(directory) / RECORD
    if not record.is_file():
        return math.nan
    fields = json.loads(record.read_text())
    names = {f.name for f in dataclasses.fields(RunSpec)}
    return no_gradient_level(RunSpec.from_dict({k: v for k, v in fields.items() if k in names}), fields["step"])

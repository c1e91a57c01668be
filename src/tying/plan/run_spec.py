"""A training run's spec and its learning-rate schedule, without torch: the DAG's planning (tying.plan.run_params,
the regimes' size-free numbers) and the training loop (tying.train.loop) share one definition."""

import dataclasses
import hashlib
import json
import math


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """Everything that determines a run's weights (its fingerprint guards resuming)."""

    family: str
    vocab_size: int
    eos_id: int
    hidden_size: int
    layers: int
    heads: int
    intermediate_size: int | None
    seq_len: int
    tied: bool
    input_grad_scale: float
    seed: int
    steps: int
    batch_size: int
    lr: float
    warmup: int
    min_lr_ratio: float
    weight_decay: float
    grad_clip: float
    checkpoints: tuple
    eval_batches: int
    grad_accum: int = 1
    dtype: str = "float32"
    init: str = "auto"  # a scheme of tying.train.initialisation, or the family's own (tying.plan.recipes)
    clip_qkv: float | None = None
    adam_eps: float = 1e-8
    init_offset: int = 0  # another initialisation for the same seed and batches (tying.train.models.init_seed)
    data_offset: int = 0  # the batches of seed + data_offset, the initialisation of the seed (its mirror)

    @classmethod
    def from_dict(cls, fields):
        """The spec of `to_dict`'s fields, or of JSON's or a rule's copy of them (checkpoints a list)."""
        return cls(**{**fields, "checkpoints": tuple(fields["checkpoints"])})

    def to_dict(self):
        fields = dataclasses.asdict(self)
        for offset in ("init_offset", "data_offset"):  # a run without one keeps the fingerprint it had before it
            if not fields[offset]:
                del fields[offset]
        return fields

    def fingerprint(self):
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()[:16]


def lr_lambda(spec):
    """Linear warmup to 1, then cosine decay to min_lr_ratio at the last step."""

    def factor(step):
        if step < spec.warmup:
            return (step + 1) / spec.warmup
        progress = (step - spec.warmup) / max(1, spec.steps - spec.warmup)
        return spec.min_lr_ratio + (1 - spec.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))

    return factor

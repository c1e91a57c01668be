"""What determines one training run's weights, from the config: the train rule's params."""

from tying.plan.decay import weight_decay_for
from tying.plan.recipes import clip_qkv, init_scheme
from tying.plan.run_spec import RunSpec
from tying.plan.runs import model_dims, schedule


def run_params(config, arch, variant):
    """Everything from the config that determines one training run's weights (RunSpec fields
    but seed and vocabulary, the weight decay resolved from train.total_decay where that is set); as a rule's
    params, a change to any of them reruns the job. train.lr is the architecture's own `train.lr` where it has
    one (a scaling size's `lr`)."""
    own, var = config["architectures"][arch].get("train", {}), config["variants"][variant]
    train = {**config["train"], **({"lr": own["lr"]} if "lr" in own else {})}
    runs = schedule(config, arch)
    keys = (
        "batch_size",
        "lr",
        "warmup",
        "min_lr_ratio",
        "weight_decay",
        "grad_clip",
        "eval_batches",
        "grad_accum",
        "dtype",
        "adam_eps",
    )
    family, dims = config["architectures"][arch]["family"], model_dims(config, arch)
    run = {
        "family": family,
        **dims,
        "init": init_scheme(family, dims["init"]),
        "clip_qkv": clip_qkv(family, dims["clip_qkv"]),
        "tied": var["tied"],
        "input_grad_scale": float(var.get("input_grad_scale", 1.0)),
        **{k: var[k] for k in ("init_offset", "data_offset") if var.get(k)},  # absent: as before offsets
        "checkpoints": list(runs.checkpoints),
        "steps": runs.steps,
        **{k: train[k] for k in keys},
    }
    if train.get("total_decay"):  # the weight decay whose total over this run's schedule is train.total_decay
        unit = RunSpec.from_dict({**run, "seed": 0, "vocab_size": 0, "eos_id": 0})
        run["weight_decay"] = weight_decay_for(unit, train["total_decay"])
    return run

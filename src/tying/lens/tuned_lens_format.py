"""Lenses in tuned-lens 0.2's folder format, written and read: `config.json` and `params.pt`.

tuned-lens (`tuned_lens.nn.lenses.TunedLens`) saves `layer_translators.state_dict()`, one `nn.Linear(d, d)`
per state 0..L-1 under the keys `{i}.weight`, `{i}.bias`, applied as h -> h + W h + b: the parametrisation of
`tying.lens.translators.TunedLens`, so the weights carry over unchanged. Its config.json names the base
model and revision, d_model, num_hidden_layers, bias, lens_type and `unembed_hash`, the sha256 of numpy's
one-decimal printout of the unembedding matrix as float32 (`tuned_lens.utils.tensor_hash`; numpy prints a
large matrix as its corners). A lens read here must match its model in width, depth and that hash.

A pair may name such a folder per role (`lens: {tied: DIR, untied: DIR}`): the lens job then scores it in
place of training one (`given_lens_job`).
"""

import json
from pathlib import Path

import torch

from tying.checkpoints.lens_folder import CONFIG, LENS_TYPE, PARAMS, read_lens_config
from tying.checkpoints.unembedding_hash import matrix_hash
from tying.errors import PipelineError
from tying.io import atomic_path
from tying.lens.scoring import scoring_args, state_means, window_kl
from tying.lens.translators import TunedLens, WhitenedLens
from tying.plan.references import reference


def unembed_hash(model):
    """tuned-lens's hash of `model`'s unembedding matrix (`Unembed.unembedding_hash`)."""
    return matrix_hash(model.get_output_embeddings().weight.detach().cpu().float().numpy())


def save_tuned_lens(lens, model, path, *, base_model, revision=None):
    """Write `lens` (a WhitenedLens as its plain translators) for `model` as a tuned-lens folder at `path`,
    atomically; base_model and revision name the model as its users load it (a hub repository, a directory)."""
    lens = lens.plain() if isinstance(lens, WhitenedLens) else lens
    config = {
        "base_model_name_or_path": str(base_model),
        "d_model": model.config.hidden_size,
        "num_hidden_layers": model.config.num_hidden_layers,
        "bias": True,
        "base_model_revision": revision,
        "unembed_hash": unembed_hash(model),
        "lens_type": LENS_TYPE,
    }
    params = {}
    for i in range(len(lens.weight)):
        params[f"{i}.weight"] = lens.weight[i].detach().float().cpu().clone()
        params[f"{i}.bias"] = lens.bias[i].detach().float().cpu().clone()
    with atomic_path(path) as tmp:
        tmp.mkdir()
        torch.save(params, tmp / PARAMS)
        (tmp / CONFIG).write_text(json.dumps(config, indent=2) + "\n")


def load_tuned_lens(path, model):
    """The tuned-lens folder at `path` as a TunedLens on `model`'s device, refused with one line when its
    d_model, layer count or unembedding hash (when it states one) is not `model`'s, or its params.pt does not
    hold one d x d translator per state 0..L-1."""
    path, config = Path(path), read_lens_config(path)
    d, n = model.config.hidden_size, model.config.num_hidden_layers
    if (config["d_model"], config["num_hidden_layers"]) != (d, n):
        raise PipelineError(
            f"{path}: a lens for d_model {config['d_model']} and {config['num_hidden_layers']} "
            f"layers; the model has d_model {d} and {n} layers"
        )
    if config.get("unembed_hash") and config["unembed_hash"] != unembed_hash(model):
        raise PipelineError(f"{path}: its unembed_hash is not the model's: a lens for another model's unembedding")
    try:
        params = torch.load(path / PARAMS, map_location="cpu", weights_only=True)
    except Exception as error:  # a damaged or foreign file: torch raises many kinds
        raise PipelineError(f"{path / PARAMS}: unreadable ({type(error).__name__})") from None
    params = {key.removeprefix("layer_translators."): value for key, value in params.items()}
    bias = config.get("bias", True)
    wanted = {f"{i}.{p}" for i in range(n) for p in (("weight", "bias") if bias else ("weight",))}
    if (
        set(params) != wanted
        or any(params[f"{i}.weight"].shape != (d, d) for i in range(n))
        or (bias and any(params[f"{i}.bias"].shape != (d,) for i in range(n)))
    ):
        raise PipelineError(
            f"{path / PARAMS}: not {n} translators of shape ({d}, {d})" + (f" with ({d},) biases" if bias else "")
        )
    lens = TunedLens(n, d)
    with torch.no_grad():
        for i in range(n):
            lens.weight[i] = params[f"{i}.weight"].float()
            if bias:
                lens.bias[i] = params[f"{i}.bias"].float()
    return lens.to(model.device).eval()


def base_model(ref, model_dir):
    """(base_model_name_or_path, base_model_revision) of a pair member: a hub repository at its revision,
    else the directory the lens job read the model from (a trained run's, or a local one)."""
    return reference(ref).pin or (str(model_dir), None)


def given_lens_job(model, lens, val, cfg):
    """The lens job's (frame, windows) for a given lens, scored on the validation windows a trained one is
    (tying.lens.jobs.lens_job); nothing is trained, so there is no check along training: kl_check_bits is NaN,
    check_step and steps are 0."""
    windows = window_kl(model, lens, val, **scoring_args(cfg))
    tuned = windows[windows["lens"] == "tuned"].drop(columns="lens").assign(kl_check_bits=float("nan"))
    return state_means(windows), tuned.reset_index(drop=True).assign(check_step=0, steps=0)

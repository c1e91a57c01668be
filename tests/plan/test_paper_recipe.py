"""configs/paper-train.yaml trains as the paper's authors trained OLMo-1B: the values of their
OLMo/configs/custom/OLMo-1B-tied-no-scale-10000.yaml (tied; the untied and scaled runs differ only in
weight_tying and the gradient scale), as each of our runs resolves them."""

import dataclasses

import pytest
from snakerun import ROOT

from tying.plan.checks import check
from tying.plan.layers import load
from tying.plan.run_params import run_params
from tying.plan.run_spec import RunSpec, lr_lambda
from tying.train.loop import build

# The authors' config, key by key (model, optimizer, scheduler and trainer sections).
AUTHORS = {
    "d_model": 2048,
    "n_layers": 16,
    "n_heads": 16,
    "mlp_hidden_size": 8192,  # mlp_ratio 8, SwiGLU halves it
    "max_sequence_length": 4096,
    "clip_qkv": 8.0,
    "init_fn": "mitchell",
    "precision": "amp_bf16",
    "learning_rate": 3e-4,
    "weight_decay": 0.1,
    "betas": (0.9, 0.95),
    "eps": 1e-5,
    "decay_embeddings": True,
    "t_warmup": 1000,
    "alpha_f": 0.1,
    "max_duration": 10000,
    "global_train_batch_size": 512,
    "max_grad_norm": 1.0,
}


@pytest.fixture(scope="module")
def runs():
    config = load("configs/paper-train.yaml")
    check(config, ROOT / "workflow" / "schemas" / "config.schema.yaml")
    return {v: run_params(config, "olmo", v) for v in config["pairs"]["main"]["scaled"] + ["tied", "untied"]}


def test_every_run_has_the_authors_model_and_schedule(runs):
    for variant, run in runs.items():
        assert (run["hidden_size"], run["layers"], run["heads"], run["intermediate_size"], run["seq_len"]) == (
            AUTHORS["d_model"],
            AUTHORS["n_layers"],
            AUTHORS["n_heads"],
            AUTHORS["mlp_hidden_size"],
            AUTHORS["max_sequence_length"],
        ), variant
        assert run["init"] == "olmo" and AUTHORS["init_fn"] == "mitchell"
        assert run["clip_qkv"] == AUTHORS["clip_qkv"]
        assert run["dtype"] == "bfloat16" and AUTHORS["precision"] == "amp_bf16"
        assert (run["lr"], run["weight_decay"], run["adam_eps"]) == (
            AUTHORS["learning_rate"],
            AUTHORS["weight_decay"],
            AUTHORS["eps"],
        )
        assert (run["warmup"], run["min_lr_ratio"], run["steps"]) == (
            AUTHORS["t_warmup"],
            AUTHORS["alpha_f"],
            AUTHORS["max_duration"],
        )
        assert (run["batch_size"], run["grad_clip"]) == (AUTHORS["global_train_batch_size"], AUTHORS["max_grad_norm"])


def test_the_optimizer_and_schedule_are_the_authors(runs):
    """AdamW's betas, eps and weight decay on the embedding (built at a small width: the optimizer does not
    depend on it), and a linear warmup to the peak followed by a cosine to alpha_f of it."""
    small = {**runs["tied"], "hidden_size": 32, "heads": 2, "intermediate_size": 64, "layers": 2, "seq_len": 16}
    spec = RunSpec(**small, seed=0, vocab_size=128, eos_id=0)
    model, _, opt, _ = build(spec, "cpu")
    (group,) = [g for g in opt.param_groups if any(p is model.get_input_embeddings().weight for p in g["params"])]
    assert (group["betas"], group["eps"], group["weight_decay"]) == (
        AUTHORS["betas"],
        AUTHORS["eps"],
        AUTHORS["weight_decay"],
    )
    assert AUTHORS["decay_embeddings"]
    factor = lr_lambda(dataclasses.replace(spec, steps=runs["tied"]["steps"]))
    assert factor(AUTHORS["t_warmup"] - 1) == 1.0
    assert factor(AUTHORS["t_warmup"] // 2 - 1) == pytest.approx(0.5)
    assert factor(AUTHORS["max_duration"]) == pytest.approx(AUTHORS["alpha_f"])

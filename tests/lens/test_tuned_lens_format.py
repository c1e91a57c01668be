"""Lenses in tuned-lens 0.2's folder format: written, read back to the same held-out KL, refused when they do
not fit their model, and named per role in a pair's config."""

import copy
import json
import shutil

import numpy as np
import pandas as pd
import pytest
import torch
import transformers as tf
import yaml
from snakerun import ROOT, snakemake
from test_lens import markov_tokens

from tying.errors import PipelineError
from tying.lens.fitting import train_lens
from tying.lens.scoring import evaluate_lens
from tying.lens.tuned_lens_format import given_lens_job, load_tuned_lens, save_tuned_lens, unembed_hash
from tying.plan.checks import check

SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
MICRO = yaml.safe_load((ROOT / "tests" / "micro.yaml").read_text())
V, D, SEQ = 64, 32, 16
# tuned_lens.nn.lenses.TunedLensConfig's fields, in tuned-lens 0.2.0
TUNED_LENS_CONFIG = {
    "base_model_name_or_path",
    "d_model",
    "num_hidden_layers",
    "bias",
    "base_model_revision",
    "unembed_hash",
    "lens_type",
}


def olmo(seed=0, layers=2, hidden=D):
    torch.manual_seed(seed)
    config = tf.OlmoConfig(
        vocab_size=V,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=SEQ,
        initializer_range=0.3,
    )
    return tf.AutoModelForCausalLM.from_config(config).eval().requires_grad_(False)


CFG = {"seq_len": SEQ, "batch_size": 8, "eval_batches": None}
VAL = markov_tokens(800, 2)


@pytest.fixture(scope="module")
def trained():
    """A tiny OLMo and a whitened lens trained on it for 30 steps (returned as its plain translators)."""
    model = olmo()
    lens = train_lens(model, markov_tokens(4_000, 1), seq_len=SEQ, steps=30, batch_size=8, lr=1.0, whiten=True)
    return model, lens


def test_round_trip_keeps_the_held_out_kl_within_1e_6_bits(tmp_path, trained):
    model, lens = trained
    save_tuned_lens(lens, model, tmp_path / "lens", base_model="runs/x/model", revision=None)
    back = load_tuned_lens(tmp_path / "lens", model)
    before, after = (evaluate_lens(model, m, VAL, seq_len=SEQ, batch_size=8) for m in (lens, back))
    tuned = before["lens"] == "tuned"
    assert before.loc[tuned, "kl_bits"].min() >= 0 and before.loc[tuned, "kl_bits"].iloc[0] > 0.01
    assert np.abs(before["kl_bits"].to_numpy() - after["kl_bits"].to_numpy()).max() < 1e-6
    assert torch.equal(back.weight, lens.weight.float()) and torch.equal(back.bias, lens.bias.float())


def test_the_folder_is_tuned_lens_s(tmp_path, trained):
    """config.json holds TunedLensConfig's fields; params.pt is layer_translators' state dict: one (d, d)
    weight and (d,) bias per state 0..L-1, keyed {i}.weight / {i}.bias."""
    model, lens = trained
    save_tuned_lens(lens, model, tmp_path / "lens", base_model="org/model", revision="step1000")
    config = json.loads((tmp_path / "lens" / "config.json").read_text())
    assert set(config) == TUNED_LENS_CONFIG
    assert config["d_model"] == D and config["num_hidden_layers"] == 2 and config["lens_type"] == "linear_tuned_lens"
    assert config["base_model_name_or_path"] == "org/model" and config["base_model_revision"] == "step1000"
    assert config["unembed_hash"] == unembed_hash(model) and len(config["unembed_hash"]) == 64
    params = torch.load(tmp_path / "lens" / "params.pt", weights_only=True)
    assert sorted(params) == ["0.bias", "0.weight", "1.bias", "1.weight"]
    assert torch.equal(params["1.weight"], lens.weight[1]) and params["0.bias"].shape == (D,)


def test_the_unembedding_hash_follows_the_unembedding_only():
    a, b = olmo(seed=0), olmo(seed=0)
    with torch.no_grad():
        b.model.layers[0].mlp.up_proj.weight.mul_(2)
    assert unembed_hash(a) == unembed_hash(b)
    with torch.no_grad():
        b.lm_head.weight[0, 0] += 1.0  # a corner: numpy prints a large matrix as its corners
    assert unembed_hash(a) != unembed_hash(b)


def test_a_folder_with_the_older_layer_translators_prefix_is_read(tmp_path, trained):
    model, lens = trained
    save_tuned_lens(lens, model, tmp_path / "lens", base_model="m")
    params = torch.load(tmp_path / "lens" / "params.pt", weights_only=True)
    torch.save({f"layer_translators.{k}": v for k, v in params.items()}, tmp_path / "lens" / "params.pt")
    assert torch.equal(load_tuned_lens(tmp_path / "lens", model).weight, lens.weight)


@pytest.mark.parametrize(
    "change, message",
    [
        (
            lambda c, p: c.update(d_model=16),
            r"a lens for d_model 16 and 2 layers; the model has d_model 32 and 2 layers$",
        ),
        (
            lambda c, p: c.update(num_hidden_layers=3),
            r"a lens for d_model 32 and 3 layers; the model has d_model 32 and 2 layers$",
        ),
        (
            lambda c, p: c.update(unembed_hash="0" * 64),
            r"its unembed_hash is not the model's: a lens for another model's unembedding$",
        ),
        (
            lambda c, p: c.update(lens_type="something_else"),
            r"lens_type 'something_else'; only 'linear_tuned_lens' lenses are read$",
        ),
        (
            lambda c, p: p.update({"1.weight": torch.zeros(D, D + 1)}),
            r"params.pt: not 2 translators of shape \(32, 32\) with \(32,\) biases$",
        ),
        (lambda c, p: p.pop("1.bias"), r"params.pt: not 2 translators of shape \(32, 32\) with \(32,\) biases$"),
    ],
)
def test_a_lens_that_does_not_fit_its_model_is_refused_in_one_line(tmp_path, trained, change, message):
    model, lens = trained
    folder = tmp_path / "lens"
    save_tuned_lens(lens, model, folder, base_model="m")
    config = json.loads((folder / "config.json").read_text())
    params = torch.load(folder / "params.pt", weights_only=True)
    change(config, params)
    (folder / "config.json").write_text(json.dumps(config))
    torch.save(params, folder / "params.pt")
    with pytest.raises(PipelineError, match=message) as error:
        load_tuned_lens(folder, model)
    assert "\n" not in str(error.value)


def test_a_lens_of_another_model_with_the_same_shape_is_refused(tmp_path, trained):
    model, lens = trained
    save_tuned_lens(lens, model, tmp_path / "lens", base_model="m")
    with pytest.raises(PipelineError, match="its unembed_hash is not the model's"):
        load_tuned_lens(tmp_path / "lens", olmo(seed=1))


def test_a_given_lens_is_scored_as_a_trained_one_without_a_check(tmp_path, trained):
    model, lens = trained
    save_tuned_lens(lens, model, tmp_path / "lens", base_model="m")
    frame, windows = given_lens_job(model, load_tuned_lens(tmp_path / "lens", model), VAL, CFG)
    expected = evaluate_lens(model, lens, VAL, seq_len=SEQ, batch_size=8)
    assert np.abs(frame["kl_bits"].to_numpy() - expected["kl_bits"].to_numpy()).max() < 1e-6
    assert list(windows.columns) == ["window", "layer", "kl_bits", "kl_check_bits", "check_step", "steps"]
    assert len(windows) == (len(VAL) // SEQ) * 3 and windows["kl_check_bits"].isna().all()
    assert (windows["steps"] == 0).all() and (windows["check_step"] == 0).all()


def write_folder(path, d_model, layers):
    path.mkdir(parents=True)
    (path / "config.json").write_text(
        json.dumps({"d_model": d_model, "num_hidden_layers": layers, "lens_type": "linear_tuned_lens"})
    )
    (path / "params.pt").write_bytes(b"")
    return str(path)


def test_the_config_check_reads_a_pairs_given_lenses(tmp_path):
    """A trained pair's given lens must be as wide and deep as its architecture, and be a tuned-lens folder."""
    dims = MICRO["model"]

    def with_lens(lens):
        config = copy.deepcopy(MICRO)
        config["pairs"]["main"]["lens"] = lens
        return config

    check(with_lens({"tied": write_folder(tmp_path / "ok", dims["hidden_size"], dims["layers"])}), SCHEMA)
    deep = write_folder(tmp_path / "deep", dims["hidden_size"], dims["layers"] + 1)
    with pytest.raises(
        PipelineError,
        match=rf"^pairs.main.lens.untied: {deep} is a lens for d_model "
        rf"{dims['hidden_size']} and {dims['layers'] + 1} layers; the untied model "
        rf"has d_model {dims['hidden_size']} and {dims['layers']} layers$",
    ):
        check(with_lens({"untied": deep}), SCHEMA)
    with pytest.raises(PipelineError, match=rf"^pairs.main.lens.tied: {tmp_path / 'none'}: no such lens folder$"):
        check(with_lens({"tied": str(tmp_path / "none")}), SCHEMA)
    (tmp_path / "half").mkdir()
    with pytest.raises(
        PipelineError, match=r"^pairs.main.lens.tied: .*half: not a tuned-lens folder \(no config.json\)"
    ):
        check(with_lens({"tied": str(tmp_path / "half")}), SCHEMA)
    with pytest.raises(PipelineError, match=r"^pairs.main.lens"):
        check(with_lens({"other": "x"}), SCHEMA)


def test_the_lens_rule_writes_a_tuned_lens_folder_and_scores_a_given_one_instead_of_training(tmp_path):
    """The micro config's tied model: its lens job writes the folder; named as the pair's tied lens, the folder
    is scored (the same KL, no training, steps 0) by a lens job rerun in its place."""
    target = "results/metrics/lens/main/tied/seed0.parquet"
    built = snakemake(tmp_path, target, config=MICRO)
    assert built.returncode == 0, built.stderr[-2000:]
    folder = tmp_path / "results/lens/main/tied/seed0.tuned-lens"
    config = json.loads((folder / "config.json").read_text())
    assert config["base_model_name_or_path"].endswith("results/checkpoints/olmo/tied/seed0/step6")
    assert config["num_hidden_layers"] == MICRO["model"]["layers"] and config["base_model_revision"] is None
    given = tmp_path / "given"
    shutil.copytree(folder, given)
    trained = pd.read_parquet(tmp_path / target)
    rerun = snakemake(
        tmp_path,
        target,
        config={**MICRO, "pairs": {**MICRO["pairs"], "main": {**MICRO["pairs"]["main"], "lens": {"tied": str(given)}}}},
    )
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert "rule train" not in rerun.stdout + rerun.stderr and "rule lens:" in rerun.stdout + rerun.stderr
    assert "steps, their readout products" not in (tmp_path / "logs/lens/main/tied/seed0.log").read_text()
    scored = pd.read_parquet(tmp_path / target)
    assert np.abs(scored["kl_bits"].to_numpy() - trained["kl_bits"].to_numpy()).max() < 1e-6
    windows = pd.read_parquet(tmp_path / "results/metrics/lens/main/tied/seed0.windows.parquet")
    assert (windows["steps"] == 0).all() and windows["kl_check_bits"].isna().all()

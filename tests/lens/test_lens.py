"""Tuned lens: readout per family, state indexing, KL in bits, training, C3 statistic, figure."""

import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import transformers as tf
import yaml
from safetensors.torch import load_file

from tying.claims import statistics, verdicts
from tying.claims.statistics import early_layer_gap
from tying.errors import PipelineError
from tying.lens import fitting
from tying.lens.certificate import NOT_CONVERGED, TOLERANCE, certificate, seed_window_interval, state_limit
from tying.lens.fitting import backward_lens, check_step, lens_schedule, recipe, train_lens
from tying.lens.jobs import REFERENCE_FACTOR, lens_job, reference_check
from tying.lens.scoring import evaluate_lens, kl_from_target, target, target_probabilities, token_kl, window_kl
from tying.lens.translators import TunedLens, WhitenedLens, readout_fisher, save_lens
from tying.lens.unembed import Readout, _states, final_norm, product_dtype, stacked_states
from tying.report.figures.kl_by_layer import plot_kl_by_layer
from tying.stats import mean_ci, token_bootstrap_ci
from tying.train.models import frozen_model

ROOT = Path(__file__).resolve().parents[2]
V, D, SEQ = 64, 32, 16


def readout(model, h):
    """Logits the model's own final norm and unembedding give a residual state: (..., d) -> (..., V)."""
    return model.get_output_embeddings()(final_norm(model)(h))


@torch.no_grad()
def residual_states(model, input_ids):
    """Residual states 0..L and the model's logits for a batch of token ids: (list of L + 1 (B, T, d), (B, T, V))."""
    states, out = _states(model, model, input_ids)
    return states, out.logits


def kl_bits(target_logits, lens_logits):
    """Per-token KL(p_target || p_lens) in bits. (..., V), (..., V) -> (...)."""
    return kl_from_target(target(target_logits), lens_logits)


def backward_mean_kl(p, lens_logits):
    """Backpropagate the mean per-token KL(p || softmax(q)) in nats by its gradient in the logits,
    (softmax(q) - p) / N: the formula `backward_lens` applies to every state at once."""
    q = lens_logits.reshape(p.shape).float()
    grad = q.softmax(-1).sub_(p).div_(len(p))
    lens_logits.backward(grad.reshape(lens_logits.shape).to(lens_logits.dtype))


def load_lens(path):
    """A lens written by `save_lens`, read back."""
    tensors = load_file(path)
    lens = TunedLens(*tensors["bias"].shape)
    lens.load_state_dict(tensors)
    return lens.eval()


TINY = {
    "olmo": lambda: tf.OlmoConfig(
        vocab_size=V,
        hidden_size=D,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=SEQ,
    ),
    "gpt_neox": lambda: tf.GPTNeoXConfig(
        vocab_size=V,
        hidden_size=D,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=SEQ,
    ),
    "gpt2": lambda: tf.GPT2Config(vocab_size=V, n_embd=D, n_layer=2, n_head=4, n_positions=SEQ),
    "gpt_neo": lambda: tf.GPTNeoConfig(
        vocab_size=V,
        hidden_size=D,
        num_layers=2,
        num_heads=4,
        window_size=8,
        attention_types=[[["global", "local"], 1]],
        max_position_embeddings=SEQ,
    ),
    "llama": lambda: tf.LlamaConfig(
        vocab_size=V,
        hidden_size=D,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=64,
        max_position_embeddings=SEQ,
    ),
    "qwen3": lambda: tf.Qwen3Config(
        vocab_size=V,
        hidden_size=D,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        intermediate_size=64,
        max_position_embeddings=SEQ,
    ),
}


def tiny_model(family, **overrides):
    torch.manual_seed(0)
    config = TINY[family]()
    for key, value in overrides.items():
        setattr(config, key, value)
    return tf.AutoModelForCausalLM.from_config(config).eval().requires_grad_(False)


def markov_tokens(n, seed, vocab=V):
    """Each token has two likely successors, so a model's layers have structure to expose."""
    rng = np.random.default_rng(seed)
    successors = np.random.default_rng(0).integers(0, vocab, size=(vocab, 2))
    out = np.zeros(n, dtype=np.uint16)
    pick = rng.random(n) < 0.8
    for i in range(1, n):
        out[i] = successors[out[i - 1], 0 if pick[i] else 1]
    return out


@pytest.mark.parametrize("family", sorted(TINY))
def test_final_state_readout_reproduces_model_logits(family):
    model = tiny_model(family)
    ids = torch.randint(0, V, (2, SEQ))
    states, logits = residual_states(model, ids)
    assert len(states) == model.config.num_hidden_layers + 1
    assert torch.equal(readout(model, states[-1]), logits)
    assert kl_bits(logits, readout(model, states[-1])).abs().max() < 1e-5
    # transformers' own last hidden state is already normed: reading it again would not match.
    assert not torch.allclose(states[-1], model(ids, output_hidden_states=True).hidden_states[-1])


def test_kl_is_in_bits():
    p = torch.tensor([[0.0, -math.inf], [0.0, 0.0], [0.0, 0.0]])  # (1, 0), (.5, .5), (.5, .5)
    q = torch.tensor([[0.0, 0.0], [0.0, 0.0], [0.0, math.log(3)]])  # (.5, .5), (.5, .5), (.25, .75)
    expected = torch.tensor([1.0, 0.0, 0.5 * 1 + 0.5 * math.log2(0.5 / 0.75)])
    torch.testing.assert_close(kl_bits(p, q), expected)


def test_lens_training_gradient_is_autograds_gradient_of_the_mean_kl_in_nats():
    torch.manual_seed(0)
    target, weight = torch.randn(5, 7, 11), torch.randn(11, 11, requires_grad=True)
    h = torch.randn(5, 7, 11)
    backward_mean_kl(target_probabilities(target), h @ weight)
    log_p = target.log_softmax(-1)
    nats = (log_p.exp() * (log_p - (h @ weight).log_softmax(-1))).sum(-1)  # trained in nats, as tuned-lens
    (expected,) = torch.autograd.grad(nats.mean(), weight)
    torch.testing.assert_close(weight.grad, expected)
    torch.testing.assert_close(kl_bits(target, h @ weight).mean(), nats.mean() / math.log(2))


def test_untrained_tuned_lens_equals_logit_lens():
    model = tiny_model("olmo", initializer_range=0.3)
    lens = TunedLens(model.config.num_hidden_layers, D)
    frame = evaluate_lens(model, lens, markov_tokens(400, 1), seq_len=SEQ, batch_size=4, batches=2)
    wide = frame.pivot(index="layer", columns="lens", values="kl_bits")
    assert list(wide.index) == [0, 1, 2]
    assert (wide["tuned"] == wide["logit"]).all()
    assert (wide["logit"].iloc[:-1] > 0.01).all() and wide["logit"].iloc[-1] < 1e-5


def test_state_l_is_read_with_translator_l():
    model = tiny_model("gpt_neox")
    lens = TunedLens(model.config.num_hidden_layers, D)
    with torch.no_grad():
        lens.bias[1] = 3 * torch.randn(D)
    frame = evaluate_lens(model, lens, markov_tokens(200, 1), seq_len=SEQ, batch_size=4, batches=1)
    wide = frame.pivot(index="layer", columns="lens", values="kl_bits")
    changed = (wide["tuned"] - wide["logit"]).abs() > 1e-4
    assert changed.tolist() == [False, True, False]


def test_training_lowers_early_kl_below_logit_lens():
    model = tiny_model("olmo", initializer_range=0.3)
    lens = train_lens(model, markov_tokens(20_000, 1), seq_len=SEQ, steps=60, batch_size=8, lr=1.0)
    frame = evaluate_lens(model, lens, markov_tokens(2_000, 2), seq_len=SEQ, batch_size=8, batches=4)
    wide = frame.pivot(index="layer", columns="lens", values="kl_bits")
    assert wide.loc[0, "tuned"] < 0.7 * wide.loc[0, "logit"]
    assert wide.loc[1, "tuned"] < wide.loc[1, "logit"]
    assert wide.loc[2, "tuned"] == wide.loc[2, "logit"] < 1e-5


def test_first_step_is_nesterov_sgd_on_the_clipped_global_gradient():
    # Step 1 from A = b = 0 (no decay yet): the update is lr (1 - m) (1 + m) times the gradient, its norm
    # over every translator together clipped to grad_clip, so the update's norm is known exactly.
    model, tokens = tiny_model("olmo", initializer_range=0.3), markov_tokens(2_000, 1)
    for clip, lr in ((1e-3, 1.0), (2e-3, 0.5)):
        lens = train_lens(model, tokens, seq_len=SEQ, steps=1, batch_size=4, lr=lr, momentum=0.9, grad_clip=clip)
        norm = torch.cat([lens.weight.flatten(), lens.bias.flatten()]).norm().item()
        assert norm == pytest.approx(lr * 0.1 * 1.9 * clip, rel=1e-4)
    unclipped = train_lens(model, tokens, seq_len=SEQ, steps=1, batch_size=4, lr=1.0, grad_clip=None)
    assert torch.cat([unclipped.weight.flatten(), unclipped.bias.flatten()]).norm() > 0.19 * 1e-2
    adam = train_lens(model, tokens, seq_len=SEQ, steps=1, batch_size=4, lr=1e-3, optimizer="adam", grad_clip=None)
    assert adam.bias.abs().max().item() == pytest.approx(1e-3, rel=1e-3)  # Adam's first step: lr * sign(g)
    with pytest.raises(PipelineError, match="optimizer"):
        train_lens(model, tokens, seq_len=SEQ, steps=1, batch_size=4, lr=1.0, optimizer="lion")


def test_schedule_anneals_to_zero_at_the_check_then_restarts_at_a_quarter_of_the_peak():
    """The learning rate each of 8 steps uses: linear towards 0 over the first 6 (after step 6 the lens job
    keeps its check copy, an annealed lens), then a quarter of the peak, towards 0 over the last 2."""
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    schedule, used = torch.optim.lr_scheduler.LambdaLR(opt, lens_schedule(8)), []
    for _ in range(8):
        used.append(opt.param_groups[0]["lr"])
        opt.step()
        schedule.step()
    assert check_step(8) == 6
    assert used == pytest.approx([1, 5 / 6, 4 / 6, 3 / 6, 2 / 6, 1 / 6, 0.25, 0.125])


def tiny_recipe():
    """The config's lens recipe and budget, scaled to 16-token windows (4x the windows, the same tokens per step)."""
    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())["lens"]
    return {
        **cfg,
        "seq_len": SEQ,
        "batch_size": cfg["batch_size"] * cfg["seq_len"] // SEQ,
        "eval_batches": None,
        "device": "cpu",
        "dtype": "float32",
    }


@pytest.fixture(scope="module")
def trained_tiny():
    """A tied tiny OLMo trained for 150 steps on the Markov stream (a lens on a random model converges unlike
    one on a trained model), with its train and validation tokens."""
    train, val = markov_tokens(40_000, 1), markov_tokens(4_000, 2)
    model = tiny_model("olmo", tie_word_embeddings=True).train().requires_grad_(True)
    opt, rng = torch.optim.AdamW(model.parameters(), lr=3e-3), np.random.default_rng(0)
    for _ in range(150):
        ids = torch.from_numpy(
            np.stack([train[s : s + SEQ].astype(np.int64) for s in rng.integers(0, len(train) - SEQ, 16)])
        )
        loss = model(input_ids=ids, labels=ids).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval().requires_grad_(False), train, val


def test_default_budget_is_within_tolerance_of_its_4x_reference_on_a_tiny_model(trained_tiny):
    """The config's recipe and budget: every state's held-out KL within the certificate's tolerance of a lens
    trained for 4x the steps (the lens_convergence job's check), and the lens learnt."""
    (model, train, val), cfg = trained_tiny, tiny_recipe()
    budget = evaluate_lens(model, train_lens(model, train, **recipe(cfg)), val, seq_len=SEQ, batch_size=8)
    check = reference_check(model, train, val, cfg, budget, seed=0)
    assert check["reference_steps"].iloc[0] == REFERENCE_FACTOR * cfg["steps"]
    logit = budget.query("lens == 'logit'")["kl_bits"].iloc[0]
    assert check["kl_budget_bits"].iloc[0] < 0.1 * logit  # it learnt
    assert check["change_bits"].abs().max() <= TOLERANCE


def test_whitened_training_reaches_the_plain_recipes_optimum_on_a_tiny_model(trained_tiny):
    """The default budget in whitened coordinates ends at or below, at every state, the held-out KL of the
    plain translators (tuned-lens's parametrisation) trained for 4x as long."""
    (model, train, val), cfg = trained_tiny, tiny_recipe()
    score = (
        lambda whiten, steps: evaluate_lens(
            model,
            train_lens(model, train, **{**recipe(cfg), "whiten": whiten, "fisher": False, "steps": steps}),
            val,
            seq_len=SEQ,
            batch_size=8,
        )
        .query("lens == 'tuned'")
        .set_index("layer")["kl_bits"]
    )
    whitened, plain = score(True, cfg["steps"]), score(False, 4 * cfg["steps"])
    assert (whitened <= plain + TOLERANCE).all() and whitened.iloc[0] < plain.iloc[0]


def test_fisher_whitened_training_reaches_the_input_whitened_optimum_on_a_tiny_model(trained_tiny):
    """Whitening the output side too (lens.fisher) ends the default budget at or below, at every state, the
    held-out KL of input whitening alone trained for 4x as long."""
    (model, train, val), cfg = trained_tiny, tiny_recipe()
    score = (
        lambda fisher, steps: evaluate_lens(
            model,
            train_lens(model, train, **{**recipe(cfg), "whiten": True, "fisher": fisher, "steps": steps}),
            val,
            seq_len=SEQ,
            batch_size=8,
        )
        .query("lens == 'tuned'")
        .set_index("layer")["kl_bits"]
    )
    both, inputs = score(True, cfg["steps"]), score(False, 4 * cfg["steps"])
    assert (both <= inputs + TOLERANCE).all()


def test_fisher_needs_input_whitening():
    model = tiny_model("olmo")
    with pytest.raises(PipelineError, match="lens.whiten"):
        train_lens(model, markov_tokens(1_000, 1), seq_len=SEQ, steps=1, batch_size=4, lr=0.01, fisher=True)


@pytest.mark.parametrize("family", ["olmo", "gpt_neox"])
def test_readout_fisher_is_the_readouts_expected_curvature(family):
    """readout_fisher's labels are drawn from the model's own distribution, so over many draws it approaches
    the exact sum over tokens of J_l^T W^T (diag p - p p^T) W J_l, with J_l the final norm's Jacobian at
    state l (computed token by token with torch.autograd.functional.jacobian)."""
    model = tiny_model(family, initializer_range=0.3)
    states = stacked_states(model, torch.randint(0, V, (1, 8)))  # (3, 8, D): 8 tokens
    head, norm = model.get_output_embeddings().weight, Readout(model).norm
    p = torch.softmax(readout(model, states[2]), -1)
    exact = torch.zeros(2, D, D, dtype=torch.float64)
    for token in range(states.shape[1]):
        curvature = head.T @ (torch.diag(p[token]) - torch.outer(p[token], p[token])) @ head
        for state in range(2):
            jac = torch.autograd.functional.jacobian(norm, states[state, token])
            exact[state] += (jac.T @ curvature @ jac).double()
    draws = 4_000
    sampled = readout_fisher(Readout(model), states.repeat(1, draws, 1), torch.Generator().manual_seed(0)) / draws
    assert (torch.linalg.matrix_norm(sampled - exact) < 0.05 * torch.linalg.matrix_norm(exact)).all()  # ~1% here


@pytest.mark.parametrize("output", [False, True], ids=["input side", "both sides"])
def test_whitened_lens_is_a_plain_lens_in_other_coordinates(output):
    """A WhitenedLens translates as the TunedLens plain() returns, with or without an output-side factor; at zero
    it is the logit lens."""
    model, ids = tiny_model("olmo", initializer_range=0.3), torch.randint(0, V, (2, SEQ))
    states = stacked_states(model, ids)
    mean, whiten = torch.randn(2, D), torch.randn(2, D, D) / D
    lens = WhitenedLens(mean, whiten, torch.randn(2, D, D) / D if output else None)
    torch.testing.assert_close(lens.translate(states[:2]), states[:2])
    with torch.no_grad():
        lens.weight.normal_()
        lens.bias.normal_()
    plain = lens.plain()
    assert type(plain) is TunedLens
    torch.testing.assert_close(lens.translate(states[:2]), plain.translate(states[:2]))
    torch.testing.assert_close(lens(states[1], 1), plain(states[1], 1))
    torch.testing.assert_close(lens.translate(states[1:2], [1]), plain.translate(states[1:2], [1]))


def perturbed_lens():
    """A two-state TunedLens away from the identity (weights N(0, 0.1), biases N(0, 0.5))."""
    lens = TunedLens(2, D)
    with torch.no_grad():
        lens.weight.normal_(0, 0.1)
        lens.bias.normal_(0, 0.5)
    return lens


@pytest.mark.parametrize("family", ["olmo", "gpt_neox", "gpt2"])
def test_hand_written_readout_backward_equals_autograd(family):
    """backward_lens (all states' logits in chunks, softmax - p in place, the unembedding's backward by hand)
    leaves the translators the gradient autograd gives the summed per-state mean KL in nats."""
    model = tiny_model(family, initializer_range=0.3)
    lens = perturbed_lens()
    ids = torch.randint(0, V, (3, SEQ))
    states, logits = residual_states(model, ids)
    log_p = logits.log_softmax(-1)
    loss = sum(
        (log_p.exp() * (log_p - readout(model, lens(states[s], s)).log_softmax(-1))).sum(-1).mean() for s in range(2)
    )
    expected = torch.autograd.grad(loss, [lens.weight, lens.bias])
    stacked = stacked_states(model, ids)
    torch.testing.assert_close(stacked, torch.stack(states).flatten(1, 2))
    for chunk in (None, 5 * 3 * V * 4):  # one chunk; chunks of 5 tokens (the last short)
        lens.zero_grad()
        backward_lens(lens, Readout(model), stacked, chunk_bytes=chunk)
        torch.testing.assert_close(lens.weight.grad, expected[0])
        torch.testing.assert_close(lens.bias.grad, expected[1])


def test_bfloat16_readout_products_give_the_float32_gradient_to_bfloat16_precision():
    """lens.train_dtype bfloat16: the step's two readout products run on a bfloat16 copy of the unembedding
    (the model's own weight untouched) and the translators' gradient stays within bfloat16's rounding of the
    float32 one."""
    model = tiny_model("olmo", initializer_range=0.3)
    lens = perturbed_lens()
    stacked = stacked_states(model, torch.randint(0, V, (3, SEQ)))
    grads = {}
    for dtype in (None, torch.bfloat16):
        lens.zero_grad()
        readout = Readout(model, dtype)
        backward_lens(lens, readout, stacked)
        grads[dtype] = (readout.weight.dtype, lens.weight.grad.clone(), lens.bias.grad.clone())
    assert grads[torch.bfloat16][0] == torch.bfloat16 and model.get_output_embeddings().weight.dtype == torch.float32
    for exact, rounded in zip(grads[None][1:], grads[torch.bfloat16][1:]):
        assert not torch.equal(exact, rounded)
        torch.testing.assert_close(rounded, exact, rtol=0.02, atol=0.02 * exact.abs().max().item())


@pytest.mark.parametrize("native", [(False, False), (True, False), (False, True)])
def test_auto_train_dtype_is_bfloat16_only_where_the_cpu_has_bfloat16_products(monkeypatch, native):
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: native[0])
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: native[1])
    assert product_dtype("auto", "cpu") == (torch.bfloat16 if any(native) else torch.float32)
    assert product_dtype("float32", "cpu") == torch.float32 and product_dtype("bfloat16", "cpu") == torch.bfloat16


def test_chunked_kl_equals_the_per_state_kl():
    model, lens = tiny_model("olmo", initializer_range=0.3), TunedLens(2, D)
    with torch.no_grad():
        lens.bias.normal_(0, 0.5)
    ids = torch.randint(0, V, (3, SEQ))
    states, logits = residual_states(model, ids)
    (tuned,), logit = token_kl([(lens, None)], Readout(model), stacked_states(model, ids), chunk_bytes=7 * 5 * V * 4)
    with torch.no_grad():
        torch.testing.assert_close(
            tuned,
            torch.stack([kl_bits(logits, readout(model, lens(states[s], s))).flatten() for s in range(2)]),
            atol=1e-5,
            rtol=1e-5,
        )
        torch.testing.assert_close(
            logit,
            torch.stack([kl_bits(logits, readout(model, states[s])).flatten() for s in range(2)]),
            atol=1e-5,
            rtol=1e-5,
        )
    (early, again), none = token_kl(
        [(lens, [0]), (lens, None)], Readout(model), stacked_states(model, ids), logit=False
    )
    torch.testing.assert_close(early, tuned[:1], atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(again, tuned, atol=1e-6, rtol=1e-6)
    assert none is None


def test_lens_job_scores_every_validation_window_and_keeps_its_check(capsys):
    """The lens job scores all the consecutive windows of the validation tokens (not the first few batches),
    keeps each window's KL, and the copy at 3/4 of its steps for C3's early states; its log names the
    precision of its training products."""
    cfg, model = {**tiny_recipe(), "steps": 8, "train_dtype": "bfloat16"}, tiny_model("olmo", initializer_range=0.3)
    val = markov_tokens(50 * SEQ + 7, 2)  # 50 windows and a short tail, which is not a window
    lens, frame, windows = lens_job(model, markov_tokens(4_000, 1), val, cfg, seed=0)
    assert "lens: 8 steps, their readout products in bfloat16" in capsys.readouterr().err
    assert sorted(windows["window"].unique()) == list(range(50))
    assert (frame["n_windows"] == 50).all()
    assert windows["check_step"].iloc[0] == 6 and windows["steps"].iloc[0] == 8
    assert windows.dropna()["layer"].unique().tolist() == [0]  # the check: C3's early state only (L = 2)
    whole = window_kl(model, lens, val, seq_len=SEQ, batch_size=4)  # other batches, the same windows
    tuned = frame.query("lens == 'tuned'").set_index("layer")["kl_bits"]
    np.testing.assert_allclose(tuned, whole.query("lens == 'tuned'").groupby("layer")["kl_bits"].mean(), rtol=1e-5)
    np.testing.assert_allclose(tuned, windows.groupby("layer")["kl_bits"].mean(), rtol=1e-6)
    assert (windows.query("layer == 0")["kl_check_bits"] != windows.query("layer == 0")["kl_bits"]).any()


def test_lens_training_prints_its_step_its_batchs_kl_and_the_time_left(capsys, monkeypatch):
    """Every LOG_EVERY steps and at the last, a line with the step, the KL of that step's batch under the lens as
    it then is (the last one: the returned lens on the last batch drawn) and the time left."""
    monkeypatch.setattr(fitting, "LOG_EVERY", 2)
    cfg = {**recipe(tiny_recipe()), "steps": 5, "train_dtype": "float32"}
    model = tiny_model("olmo", initializer_range=0.3)
    tokens = markov_tokens(4_000, 1)
    lens = train_lens(model, tokens, **cfg, seed=3)
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("lens: step")]
    assert [line.split()[2] for line in lines] == ["2/5", "4/5", "5/5"]
    assert all(re.search(r"\| left \d\d:\d\d:\d\d$", line) for line in lines)
    rng = np.random.default_rng(3)
    for _ in range(5):
        starts = rng.integers(0, len(tokens) - SEQ + 1, size=cfg["batch_size"])
    states = stacked_states(model, torch.from_numpy(np.stack([tokens[s : s + SEQ].astype(np.int64) for s in starts])))
    kl = float(token_kl([(lens, None)], Readout(model), states, logit=False)[0][0].mean())
    assert float(lines[-1].split()[4]) == pytest.approx(kl, abs=1e-4) and kl > 0


@pytest.mark.parametrize("family", ["olmo", "gpt_neox"])
def test_saved_lens_evaluates_to_the_tuned_lens_kl_computed_independently(family, tmp_path):
    """evaluate_lens on a saved and reloaded lens against the tuned-lens forward written out here:
    translator h + A h + b on transformers' own hidden states, the frozen final norm, the unembedding,
    then KL(p_final || p_lens) in bits, averaged over the same consecutive windows."""
    model, tokens = tiny_model(family, initializer_range=0.3), markov_tokens(1_000, 3)
    save_lens(
        train_lens(model, markov_tokens(4_000, 1), seq_len=SEQ, steps=5, batch_size=4, lr=1.0),
        tmp_path / "lens.safetensors",
    )
    frame = evaluate_lens(model, load_lens(tmp_path / "lens.safetensors"), tokens, seq_len=SEQ, batch_size=4, batches=2)
    tensors = load_file(tmp_path / "lens.safetensors")  # read from the file itself, not through load_lens
    weight, bias = tensors["weight"], tensors["bias"]
    norm, head = {
        "olmo": lambda: (model.model.norm, model.lm_head),
        "gpt_neox": lambda: (model.gpt_neox.final_layer_norm, model.lm_head),
    }[family]()
    ids = torch.from_numpy(tokens[: 8 * SEQ].astype(np.int64)).reshape(8, SEQ)
    with torch.no_grad():
        out = model(input_ids=ids, output_hidden_states=True)
        log_p = out.logits.log_softmax(-1)
        expected = []
        for layer, h in enumerate(out.hidden_states[:-1]):
            log_q = head(norm(h + h @ weight[layer].T + bias[layer])).log_softmax(-1)
            expected.append(((log_p.exp() * (log_p - log_q)).sum(-1) / math.log(2)).mean().item())
    tuned = frame.query("lens == 'tuned'").set_index("layer")["kl_bits"]
    assert weight.abs().max() > 1e-3 and min(expected) > 0.05
    np.testing.assert_allclose(tuned.iloc[:-1], expected, rtol=1e-5, atol=1e-6)
    assert tuned.iloc[-1] < 1e-5  # the last state is the model's own logits


def test_lens_weights_round_trip(tmp_path):
    lens = TunedLens(3, 4)
    with torch.no_grad():
        lens.weight.normal_()
        lens.bias.normal_()
    save_lens(lens, tmp_path / "lens.safetensors")
    loaded = load_lens(tmp_path / "lens.safetensors")
    assert torch.equal(loaded.weight, lens.weight) and torch.equal(loaded.bias, lens.bias)


def test_frozen_model_loads_saved_directory(tmp_path):
    tiny_model("qwen3").save_pretrained(tmp_path / "qwen3")
    model = frozen_model(tmp_path / "qwen3", dtype="bfloat16")
    assert model.dtype == torch.bfloat16 and not model.training
    assert not any(p.requires_grad for p in model.parameters())
    lens = train_lens(model, markov_tokens(2_000, 1), seq_len=SEQ, steps=2, batch_size=4, lr=0.01)
    assert lens.weight.dtype == torch.float32 and lens.weight.abs().sum() > 0  # trained through bfloat16 logits
    with pytest.raises(PipelineError):
        frozen_model(tmp_path / "qwen3", dtype="float8")
    with pytest.raises(PipelineError):
        frozen_model(tmp_path / "absent")


def test_bad_tokens_are_pipeline_errors():
    """(A family whose readout cannot be read: tests/lens/test_lens_families.py.)"""
    with pytest.raises(PipelineError, match="vocabulary"):
        train_lens(tiny_model("olmo"), np.full(100, V, dtype=np.uint16), seq_len=SEQ, steps=1, batch_size=1, lr=0.1)


def kl_frame(n_blocks, tied, untied, seeds=(0, 1)):
    """A tidy frame where each role has the given tuned-lens KL at states 0..n_blocks."""
    rows = [
        {
            "pair": "olmo",
            "role": role,
            "seed": seed,
            "layer": layer,
            "lens": lens,
            "kl_bits": kl + seed + (lens == "logit"),
        }
        for role, values in (("tied", tied), ("untied", untied))
        for seed in seeds
        for lens in ("tuned", "logit")
        for layer, kl in zip(range(n_blocks + 1), values, strict=True)
    ]
    return pd.DataFrame(rows)


def test_early_layer_gap_averages_first_half_of_translated_states():
    # 3 blocks: early states are 0 and 1; 4 blocks: also 0 and 1.
    three = early_layer_gap(kl_frame(3, tied=[6, 4, 100, 0], untied=[3, 1, -100, 0]))
    assert three["gap_bits"].tolist() == [3.0, 3.0]
    assert three["tied_bits"].tolist() == [5.0, 6.0] and three["seed"].tolist() == [0, 1]
    four = early_layer_gap(kl_frame(4, tied=[2, 2, 9, 9, 0], untied=[1, 0, 0, 0, 0]), lens="logit")
    assert four["gap_bits"].tolist() == [1.5, 1.5]
    with pytest.raises(PipelineError):
        early_layer_gap(kl_frame(3, tied=[1, 1, 1, 0], untied=[1, 1, 1, 0]).query("role == 'tied'"))


def test_kl_by_layer_figure_writes_a_pdf(tmp_path):
    frame = kl_frame(3, tied=[6, 4, 2, 0], untied=[3, 2, 1, 0], seeds=(0, 1, 2))
    plot_kl_by_layer(frame, tmp_path / "kl.pdf", title="OLMo pair")
    data = (tmp_path / "kl.pdf").read_bytes()
    assert data.startswith(b"%PDF") and len(data) > 2000


def test_the_certificate_the_claims_read_imports_no_model_code():
    """The claims job reads C3's certificate (tying.lens.certificate): it should not pay for torch or transformers."""
    code = "import sys, tying.lens.certificate; print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "[]\n"


def lens_frames(
    check_shift=0.0,
    reference_shift=0.0,
    reference_gap_shift=0.0,
    seeds=range(5),
    n_windows=40,
    early=(0.40, 0.38),
    middle=0.1,
):
    """C3's inputs for a 2-block pair (early state: 0): the lens jobs' per-window frames, their metric
    (the mean over the windows) and seed 0's reference checks. check_shift moves seed 1's tied KL at the
    check; reference_shift one state's reference KL (tied, state 1); reference_gap_shift the tied early state's.
    early: the tied and untied models' state-0 KL (bits); middle: their state-1 KL."""
    rng = np.random.default_rng(0)
    text = rng.normal(0, 0.05, n_windows)  # how hard each window is, shared by seeds and models
    rows = []
    for role, base in zip(("tied", "untied"), early):
        for seed in seeds:
            for layer, level in ((0, base), (1, middle), (2, 0.0)):
                kl = level + (text + rng.normal(0, 0.01, n_windows) + 0.005 * seed if layer < 2 else 0 * text)
                moved = 0.001 * (role == "tied") + (check_shift if (role, seed) == ("tied", 1) else 0)
                check = kl + moved if layer == 0 else np.nan
                rows.append(
                    pd.DataFrame(
                        {
                            "pair": "main",
                            "role": role,
                            "seed": seed,
                            "window": range(n_windows),
                            "layer": layer,
                            "kl_bits": kl,
                            "kl_check_bits": check,
                            "check_step": 300,
                            "steps": 400,
                        }
                    )
                )
    windows = pd.concat(rows, ignore_index=True)
    metric = windows.groupby(["pair", "role", "seed", "layer"])["kl_bits"].mean().reset_index().assign(lens="tuned")
    metric = pd.concat([metric, metric.assign(lens="logit", kl_bits=metric["kl_bits"] + 1)], ignore_index=True)
    reference = metric.query("lens == 'tuned' and seed == 0").rename(columns={"kl_bits": "kl_budget_bits"})
    shift = np.where((reference["role"] == "tied") & (reference["layer"] == 1), reference_shift, 0.0)
    shift += np.where((reference["role"] == "tied") & (reference["layer"] == 0), reference_gap_shift, 0.0)
    reference = reference.assign(kl_bits=reference["kl_budget_bits"] - 0.001 * (reference["layer"] < 2) - shift)
    reference = reference.assign(
        change_bits=reference["kl_bits"] - reference["kl_budget_bits"], steps=400, reference_steps=1600
    ).drop(columns="lens")
    return metric, windows, reference


def c3_row(metric, windows, reference):
    stats = statistics.claim_statistics(lens=metric, lens_windows=windows, lens_convergence=reference)
    return stats["C3"], verdicts.claims_table(stats).set_index("claim").loc["C3"]


def test_c3_is_scored_on_every_window_with_an_interval_over_seeds_and_windows():
    metric, windows, reference = lens_frames()
    stat, row = c3_row(metric, windows, reference)
    per_window = early_layer_gap(windows, lens=None, by=("window",)).pivot(
        index="window", columns="seed", values="gap_bits"
    )
    assert per_window.shape == (40, 5)  # every window of every seed
    np.testing.assert_allclose(stat.values, per_window.mean(), rtol=1e-12)
    mean, t_low, t_high = mean_ci(stat.values)
    _, w_low, w_high = token_bootstrap_ci(per_window.mean(axis=1))
    half = math.hypot((t_high - t_low) / 2, (w_high - w_low) / 2)
    assert row["mean"] == pytest.approx(mean)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((mean - half, mean + half))
    assert half > (t_high - t_low) / 2  # the windows widen the seeds' interval
    assert row["interval"] == (
        "Student-t 95% over 5 seeds and 95% bootstrap over 40 validation windows, half-widths in quadrature"
    )
    assert row["verdict"] in ("holds", "inconclusive", "does not hold")
    assert row["detail"].startswith(
        "certified: 4x reference (seed 0, 400 -> 1600 steps): states' largest |change| "
        "against its limit, tied state 0 0.0010 bits (limit 0.0050), untied state 0 "
        "0.0010 bits (limit 0.0050), C3 +0.0000"
    )
    assert "along training (300 -> 400 steps), C3 change by seed 0: -0.0010, 1: -0.0010" in row["detail"]
    one = seed_window_interval(stat.values[[0]], per_window)
    assert one[3] == "95% bootstrap over 40 validation windows, one seed"


@pytest.mark.parametrize(
    "shifts, failed",
    [
        ({"check_shift": 0.02}, "along training"),  # seed 1's C3 still moved 0.02 bits in the last quarter
        ({"reference_shift": 0.006}, "tied state 1 0.0070 bits (limit 0.0050)"),  # a 0.1-bit state moved 0.006 bits
        (
            {"reference_gap_shift": 0.003},
            "C3 -0.0030 (limit 0.00",
        ),  # within the states' tolerance, not C3's quarter half-width
    ],
)
def test_an_uncertified_lens_gives_the_verdict_lens_not_converged(shifts, failed):
    metric, windows, reference = lens_frames(**shifts)
    stat, row = c3_row(metric, windows, reference)
    assert row["verdict"] == NOT_CONVERGED == "lens not converged"
    assert row["detail"].startswith("not certified: ") and failed in row["detail"]
    certified = c3_row(*lens_frames())[1]
    assert certified["verdict"] != NOT_CONVERGED


def test_a_states_limit_is_a_share_of_its_kl_above_the_fixed_floor():
    """The reference may move a 2-bit state by 0.01 bits (1% of it is 0.02), not a 0.1-bit state (floor 0.005)."""
    assert state_limit([0.1, 0.5, 2.0]).tolist() == pytest.approx([TOLERANCE, TOLERANCE, 0.02])
    row = c3_row(*lens_frames(reference_shift=0.01, middle=2.0))[1]
    assert row["verdict"] != NOT_CONVERGED and "tied state 1 0.0110 bits (limit 0.0200)" in row["detail"]
    row = c3_row(*lens_frames(reference_shift=0.01, middle=0.1))[1]
    assert row["verdict"] == NOT_CONVERGED and "tied state 1 0.0110 bits (limit 0.0050)" in row["detail"]


def test_a_reference_that_moves_c3_by_more_than_a_quarter_of_its_half_width_fails_whatever_the_states_do():
    """Early states of 20 bits: moving the tied one by 0.1 bits is within its state limit (0.2), not C3's."""
    stat, row = c3_row(*lens_frames(reference_gap_shift=0.1, early=(20.0, 19.9)))
    assert "tied state 0 0.1010 bits (limit 0.2000)" in row["detail"]
    assert 0.1 > 0.25 * (row["ci_high"] - row["ci_low"]) / 2
    assert row["verdict"] == NOT_CONVERGED and "C3 -0.1000 (limit" in row["detail"]
    assert c3_row(*lens_frames(early=(20.0, 19.9)))[1]["verdict"] != NOT_CONVERGED


def test_the_check_along_training_allows_a_quarter_of_c3s_half_width_and_never_less_than_the_floor():
    """The default build's case: one seed's C3 moved 0.0077 bits over its lens's last quarter against an
    interval half-width of 0.044 (a quarter: 0.011); a move past that quarter fails, and so does one past the
    0.005-bit floor where the interval is narrow."""
    end = pd.Series({0: 0.10, 1: 0.12, 2: 0.08})
    for move, passed in ((0.0077, True), (0.0111, False), (-0.0111, False)):
        ok, detail = certificate(end, end - pd.Series({0: 0.0, 1: move, 2: 0.001}), 500, 375, half_width=0.044)
        assert ok is passed and f"1: {move:+.4f}" in detail and "(limit 0.0110)" in detail
    assert certificate(end, end - 0.006, 500, 375, half_width=0.01)[0] is False
    assert certificate(end, end - 0.0049, 500, 375, half_width=float("nan"))[0] is True


def test_lenses_the_pair_names_are_neither_checked_nor_given_a_reference():
    from tying.plan.claims import claims_lens_reference

    end = pd.Series({0: 0.10, 1: 0.12})
    passed, detail = certificate(end, end * np.nan, 0, 0, half_width=0.04)
    assert passed and detail.startswith("given: the pair names its lenses")
    pairs = {"trained": {}, "given": {"lens": {"tied": "/a", "untied": "/b"}}, "off": {"lens": False}}
    assert [claims_lens_reference({"pairs": pairs}, p) for p in pairs] == [True, False, False]


def test_without_a_reference_lens_the_certificate_is_the_check_along_training_and_says_so():
    metric, windows, _ = lens_frames()
    row = c3_row(metric, windows, None)[1]
    assert row["detail"].startswith("certified: along training") and "no 4x reference for this pair" in row["detail"]
    metric, windows, _ = lens_frames(check_shift=0.02)
    assert c3_row(metric, windows, None)[1]["verdict"] == NOT_CONVERGED


def test_c3_without_window_frames_keeps_the_seed_interval():
    metric, _, _ = lens_frames()
    row = verdicts.claims_table(statistics.claim_statistics(lens=metric)).set_index("claim").loc["C3"]
    assert row["interval"] == "Student-t 95% over 5 seeds" and row["detail"] == ""

"""Families outside the old readout table (Mistral, Qwen2, Gemma, Phi, OPT, GPT-2, and Cohere, Granite and
Gemma 2, which scale or soft-cap their logits): their embeddings and lens read from what each model says of
itself, offline, from `save_pretrained` directories."""

import json

import pytest
import torch
import transformers as tf
from hubfixtures import VOCAB, tiny_tokenizer
from test_lens import markov_tokens

from tying.checkpoints.embedding_names import model_embedding_names
from tying.checkpoints.embeddings import load_embeddings
from tying.checkpoints.layouts import header_embedding_names
from tying.checkpoints.safetensors_ranges import read_header
from tying.errors import PipelineError
from tying.lens.fitting import backward_lens, train_lens
from tying.lens.scoring import evaluate_lens
from tying.lens.translators import TunedLens
from tying.lens.unembed import Readout, _states, final_norm, stacked_states
from tying.metrics.alignment import alignment_frame
from tying.metrics.knn_overlap import knn_frame
from tying.plan.memory import embedding_shapes
from tying.train.models import frozen_model

D, SEQ = 32, 16
SMALL = {"vocab_size": VOCAB, "bos_token_id": 0, "eos_token_id": 0, "pad_token_id": 0}
DECODER = {
    **SMALL,
    "hidden_size": D,
    "intermediate_size": 48,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "max_position_embeddings": 128,
}
FAMILIES = {  # family -> config(tied); Gemma's final norm multiplies by 1 + weight, Phi's head has a bias
    "mistral": lambda tied: tf.MistralConfig(**DECODER, num_key_value_heads=2, tie_word_embeddings=tied),
    "qwen2": lambda tied: tf.Qwen2Config(**DECODER, num_key_value_heads=2, tie_word_embeddings=tied),
    "gemma": lambda tied: tf.GemmaConfig(**DECODER, num_key_value_heads=2, head_dim=8, tie_word_embeddings=tied),
    "phi": lambda tied: tf.PhiConfig(**DECODER, tie_word_embeddings=tied),
    "opt": lambda tied: tf.OPTConfig(
        **SMALL,
        hidden_size=D,
        ffn_dim=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        max_position_embeddings=128,
        word_embed_proj_dim=D,
        tie_word_embeddings=tied,
    ),
    "gpt2": lambda tied: tf.GPT2Config(
        **SMALL, n_embd=D, n_layer=2, n_head=4, n_positions=128, tie_word_embeddings=tied
    ),
    # the logit post-processing families: Cohere multiplies the logits by logit_scale, Granite divides them by
    # logits_scaling, Gemma 2 soft-caps them (its logits scaled by CAP_BITES in `build`, so the cap bites)
    "cohere": lambda tied: tf.CohereConfig(**DECODER, num_key_value_heads=2, logit_scale=4.0, tie_word_embeddings=tied),
    "granite": lambda tied: tf.GraniteConfig(
        **DECODER, num_key_value_heads=2, logits_scaling=0.25, tie_word_embeddings=tied
    ),
    "gemma2": lambda tied: tf.Gemma2Config(
        **DECODER, num_key_value_heads=2, head_dim=8, final_logit_softcapping=30.0, tie_word_embeddings=tied
    ),
}
CAP_BITES = 40.0  # Gemma 2's final norm's gain times this (its logits too): about a third past the soft cap of 30
CASES = [(family, tied) for family in FAMILIES for tied in (True, False)]


def build(family, tied, seed=0, **overrides):
    torch.manual_seed(seed)
    config = FAMILIES[family](tied)
    for key, value in {"initializer_range": 0.3, **overrides}.items():  # wide: logits far from uniform
        setattr(config, key, value)
    model = tf.AutoModelForCausalLM.from_config(config).eval()
    with torch.no_grad():  # random norm and bias parameters, so a readout that skips one is caught
        for name, param in model.named_parameters():
            if param.ndim == 1:
                param.normal_(0.0, 0.5)
        if family == "gemma2":  # as a larger output matrix would, without a tied model's input growing too
            gain = model.model.norm.weight  # Gemma's norms multiply by 1 + weight
            gain.copy_((1 + gain) * CAP_BITES - 1)
    return model


def save(model, path):
    model.save_pretrained(path)
    tiny_tokenizer().save_pretrained(path)
    return path


@pytest.mark.parametrize("family, tied", CASES)
def test_embeddings_are_the_models_own(tmp_path, family, tied):
    """load_embeddings reads the very matrices get_input_embeddings / get_output_embeddings hold, the header's
    reading agrees with the model's, and the memory estimate reads the same shapes."""
    model = build(family, tied)
    save(model, tmp_path)
    emb = load_embeddings(tmp_path)
    assert emb.tied is tied
    assert torch.equal(emb.input, model.get_input_embeddings().weight)
    assert torch.equal(emb.output, model.get_output_embeddings().weight)
    with open(tmp_path / "model.safetensors", "rb") as f:
        shapes = {name: entry["shape"] for name, entry in read_header(f, "model")[0].items()}
    config = json.loads((tmp_path / "config.json").read_text())
    derived = model_embedding_names(tmp_path, shapes)
    assert derived[0] in shapes and (derived[1] is None) is tied
    assert header_embedding_names(shapes, config) == derived
    assert embedding_shapes(tmp_path) == [(VOCAB, D)] * (1 if tied else 2)


@pytest.mark.parametrize("tied", [True, False])
def test_a_header_that_does_not_settle_the_names_asks_the_model(tmp_path, tied):
    """GPT-2 with as many positions as tokens stores two vocabulary-sized tables in its base model (wte, wpe):
    the header cannot tell them apart, the model built on the meta device can."""
    model = build("gpt2", tied, n_positions=VOCAB)
    save(model, tmp_path)
    with open(tmp_path / "model.safetensors", "rb") as f:
        shapes = {name: entry["shape"] for name, entry in read_header(f, "model")[0].items()}
    assert header_embedding_names(shapes, json.loads((tmp_path / "config.json").read_text())) is None
    emb = load_embeddings(tmp_path)
    assert emb.tied is tied and torch.equal(emb.input, model.get_input_embeddings().weight)
    assert torch.equal(emb.output, model.get_output_embeddings().weight)


@pytest.mark.parametrize("family", FAMILIES)
def test_alignment_and_knn_run_on_a_pair_of_the_family(tmp_path, family):
    untied, tied = (
        load_embeddings(save(build(family, tied, seed=seed), tmp_path / str(tied)))
        for seed, tied in ((1, False), (2, True))
    )
    frame = alignment_frame(untied, tied, held_out=0.25)
    assert frame["n_tokens"].max() == VOCAB and frame["cosine"].between(-1, 1).all()
    knn = knn_frame(untied, tied, ks=(5,))
    assert len(knn) and knn.select_dtypes("number").notna().all().all()


@pytest.mark.parametrize("family, tied", CASES)
def test_state_L_readout_is_the_models_logits(family, tied):
    """State L (the found final norm's input) through the final norm, the unembedding and the model's own logit
    scale and soft cap is the model's logits, exactly: the lens's KL at the last state is 0; states 0..L-1 are
    hidden_states[:-1]."""
    model = build(family, tied).requires_grad_(False)
    ids = torch.randint(0, VOCAB, (2, SEQ), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        states, out = _states(model, model, ids)
        logits = Readout(model).logits(final_norm(model)(states[-1]))
        raw = model.get_output_embeddings()(final_norm(model)(states[-1]))
    assert len(states) == model.config.num_hidden_layers + 1
    assert torch.allclose(logits, out.logits, atol=1e-5, rtol=1e-5)
    kl = torch.nn.functional.kl_div(
        logits.log_softmax(-1), out.logits.log_softmax(-1), log_target=True, reduction="none"
    ).sum(-1)
    assert kl.abs().max() < 1e-6  # KL(model || lens readout of state L) = 0
    assert not torch.allclose(model.get_output_embeddings()(states[-1]), out.logits, atol=1e-2)  # the norm matters
    if family in ("cohere", "granite", "gemma2"):  # and the post-processing: the raw unembedding is not the logits
        assert (raw - out.logits).abs().max() > 1.0
    if family == "gemma2":  # the cap bites: a third of the raw logits lie past it
        assert (raw.abs() > model.config.final_logit_softcapping).float().mean() > 0.2


@pytest.mark.parametrize("family", ["cohere", "granite", "gemma2"])
def test_the_lens_gradient_goes_through_the_logit_scale_and_the_soft_cap(family):
    """backward_lens's hand-written readout backward, through a scale and a biting soft cap, is autograd's gradient
    of the summed per-state mean KL in nats of the model's own post-processed readout, written out here."""
    model = build(family, False).requires_grad_(False)
    config, head, norm = model.config, model.get_output_embeddings(), final_norm(model)
    scale = getattr(config, "logit_scale", None) or 1 / getattr(config, "logits_scaling", 1.0)
    cap = getattr(config, "final_logit_softcapping", None)

    def readout(h):
        logits = head(norm(h)) * scale
        return logits if cap is None else cap * torch.tanh(logits / cap)

    lens = TunedLens(2, D)
    with torch.no_grad():
        lens.weight.normal_(0, 0.1)
        lens.bias.normal_(0, 0.5)
    ids = torch.randint(0, VOCAB, (3, SEQ), generator=torch.Generator().manual_seed(1))
    stacked = stacked_states(model, ids)
    log_p = readout(stacked[2]).log_softmax(-1)
    loss = sum((log_p.exp() * (log_p - readout(lens(stacked[s], s)).log_softmax(-1))).sum(-1).mean() for s in range(2))
    expected = torch.autograd.grad(loss, [lens.weight, lens.bias])
    backward_lens(lens, Readout(model), stacked)
    torch.testing.assert_close(lens.weight.grad, expected[0])
    torch.testing.assert_close(lens.bias.grad, expected[1])


@pytest.mark.parametrize("family, tied", CASES)
def test_lens_trains_and_scores_from_a_saved_directory(tmp_path, family, tied):
    model = frozen_model(save(build(family, tied), tmp_path))
    train, val = markov_tokens(3_000, 1, VOCAB), markov_tokens(640, 2, VOCAB)
    recipe = {"seq_len": SEQ, "batch_size": 8, "lr": 1.0, "optimizer": "sgd", "momentum": 0.9}
    frame = evaluate_lens(model, train_lens(model, train, steps=20, **recipe), val, seq_len=SEQ, batch_size=8)
    tuned, logit = (frame[frame["lens"] == name].set_index("layer")["kl_bits"] for name in ("tuned", "logit"))
    assert list(tuned.index) == [0, 1, 2] and tuned[2] == pytest.approx(0.0, abs=1e-5)  # state L is the model
    assert (logit[[0, 1]] > 0.05).all()
    assert (tuned[[0, 1]] < logit[[0, 1]]).all()  # 20 steps improve on the logit lens at every earlier state


def test_opt_with_a_projection_after_its_final_norm_is_refused_in_one_line():
    model = build("opt", True, word_embed_proj_dim=16)
    with pytest.raises(
        PipelineError,
        match=r"^no lens readout for model type 'opt': its last norm does not feed "
        r"the unembedding \(width 32, unembedding 16\)$",
    ):
        final_norm(model)


def test_logits_that_are_not_the_readout_are_refused_in_one_line():
    """A Cohere model that scales its logits by other than its config's logit_scale: the readout its config
    states does not reproduce them."""
    model = build("cohere", True)
    model.logit_scale = 0.5  # the config says 0.25
    with pytest.raises(
        PipelineError,
        match=r"^no lens readout for model type 'cohere': its logits are not the "
        r"unembedding of its last norm's output$",
    ):
        final_norm(model)

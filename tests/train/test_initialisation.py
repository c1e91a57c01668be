"""Each family's published initialisation: a step-0 model's matrices have the std of the family's formula."""

import math

import pytest
import torch

from tying.errors import PipelineError
from tying.plan.config import prepared
from tying.plan.recipes import clip_qkv, init_scheme
from tying.plan.run_params import run_params
from tying.train.models import build_model, model_config

# The std of a normal truncated at +-3 std, relative to the untruncated one.
_phi3 = math.exp(-4.5) / math.sqrt(2 * math.pi)
TRUNCATED_3 = math.sqrt(1 - 6 * _phi3 / math.erf(3 / math.sqrt(2)))


def build(family, init, d, layers, tied=False, seed=0, ff=None):
    config = model_config(
        family,
        vocab_size=512,
        hidden_size=d,
        layers=layers,
        heads=4,
        seq_len=16,
        tied=tied,
        eos_id=0,
        intermediate_size=ff or 4 * d,
    )
    return build_model(config, seed, init)


def olmo_expected(d, ff, layers, tied):
    """The authors' mitchell scheme written out: parameter name -> std of the untruncated normal."""
    out = {"model.embed_tokens.weight": d**-0.5}
    if not tied:
        out["lm_head.weight"] = d**-0.5
    for i in range(layers):
        for m in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "mlp.gate_proj", "mlp.up_proj"):
            out[f"model.layers.{i}.{m}.weight"] = d**-0.5
        out[f"model.layers.{i}.self_attn.o_proj.weight"] = (2 * d * (i + 1)) ** -0.5
        out[f"model.layers.{i}.mlp.down_proj.weight"] = (2 * ff * (i + 1)) ** -0.5
    return out


def neox_expected(d, layers, tied):
    """Pythia's small_init (sqrt(2 / 5d)) and, for each block's output projections, wang_init (2 / (L sqrt d))."""
    small, wang = math.sqrt(2 / (5 * d)), 2 / (layers * math.sqrt(d))
    out = {"gpt_neox.embed_in.weight": small}
    if not tied:
        out["lm_head.weight"] = small
    for i in range(layers):
        out |= {
            f"gpt_neox.layers.{i}.attention.query_key_value.weight": small,
            f"gpt_neox.layers.{i}.mlp.dense_h_to_4h.weight": small,
            f"gpt_neox.layers.{i}.attention.dense.weight": wang,
            f"gpt_neox.layers.{i}.mlp.dense_4h_to_h.weight": wang,
        }
    return out


def assert_stds(model, expected, factor):
    params = dict(model.named_parameters())
    assert set(expected) == {n for n, p in params.items() if p.ndim == 2}
    for name, std in expected.items():
        w = params[name].detach()
        # the sample std of n normal draws has a relative standard error of about 1 / sqrt(2n): allow 5 of them
        tolerance = 5 / math.sqrt(2 * w.numel())
        assert w.std().item() == pytest.approx(std * factor, rel=tolerance), name
        assert abs(w.mean().item()) < 5 * std / math.sqrt(w.numel()), name


@pytest.mark.parametrize("d,layers", [(64, 2), (128, 4)])
@pytest.mark.parametrize("tied", [True, False])
def test_olmo_scheme_draws_each_matrix_by_its_formula_truncated_at_three_std(d, layers, tied):
    model = build("olmo", "olmo", d, layers, tied)
    expected = olmo_expected(d, 4 * d, layers, tied)
    assert_stds(model, expected, TRUNCATED_3)
    params = dict(model.named_parameters())
    for name, std in expected.items():
        assert params[name].abs().max().item() <= 3 * std * (1 + 1e-6), name
    assert all(torch.all(p == 1) for n, p in params.items() if p.ndim == 1)  # norm weights as transformers'


@pytest.mark.parametrize("d,layers", [(64, 2), (128, 4)])
@pytest.mark.parametrize("tied", [True, False])
def test_gpt_neox_scheme_draws_small_init_and_wang_init(d, layers, tied):
    model = build("gpt_neox", "gpt_neox", d, layers, tied)
    assert_stds(model, neox_expected(d, layers, tied), 1.0)
    biases = [p for n, p in model.named_parameters() if n.endswith(".bias") and "layernorm" not in n]
    assert biases and all(torch.all(b == 0) for b in biases)


def test_hf_scheme_is_transformers_default():
    model = build("olmo", "hf", 64, 2)
    assert_stds(model, dict.fromkeys(olmo_expected(64, 256, 2, False), 0.02), 1.0)


@pytest.mark.parametrize("family,init", [("olmo", "olmo"), ("gpt_neox", "gpt_neox"), ("olmo", "hf")])
def test_same_seed_same_weights_and_another_seed_other_weights(family, init):
    a, b, c = (build(family, init, 64, 2, seed=s) for s in (3, 3, 4))
    for (name, pa), pb, pc in zip(a.state_dict().items(), b.state_dict().values(), c.state_dict().values()):
        assert torch.equal(pa, pb), name
        if pa.ndim == 2:
            assert not torch.equal(pa, pc), name


def test_global_generator_untouched():
    torch.manual_seed(7)
    before = torch.rand(3)
    torch.manual_seed(7)
    build("olmo", "olmo", 64, 2)
    assert torch.equal(torch.rand(3), before)


@pytest.fixture
def config():
    """config.yaml as a run reads it, validated (schema defaults filled)."""
    return prepared().config


def test_each_architecture_defaults_to_its_familys_scheme(config):
    expected = {"olmo": ("olmo", 8.0), "gpt_neox": ("gpt_neox", None), "olmo_wide": ("olmo", 8.0)}
    for arch, (scheme, clip) in expected.items():
        params = run_params(config, arch, "tied")
        assert (params["init"], params["clip_qkv"]) == (scheme, clip), arch
    assert init_scheme("llama", "auto") == init_scheme("qwen3", "auto") == "hf"


def test_an_architecture_can_take_another_scheme(config):
    config["architectures"]["olmo"]["init"] = "hf"
    assert run_params(config, "olmo", "tied")["init"] == "hf"
    config["model"]["clip_qkv"] = None
    assert run_params(config, "olmo", "untied")["clip_qkv"] is None


def test_clip_qkv_only_for_olmo():
    assert clip_qkv("gpt_neox", "auto") is None
    with pytest.raises(PipelineError, match="only the OLMo family"):
        clip_qkv("gpt_neox", 8.0)


def test_clip_qkv_clamps_queries_keys_and_values():
    config = model_config(
        "olmo", vocab_size=64, hidden_size=16, layers=1, heads=2, seq_len=8, tied=True, eos_id=0, clip_qkv=0.01
    )
    model = build_model(config, 0, "olmo")
    seen = []
    model.model.layers[0].self_attn.v_proj.register_forward_hook(lambda m, i, o: seen.append(o))
    model(input_ids=torch.arange(8)[None])
    assert seen[0].abs().max().item() <= 0.01  # clamped in place after the projection

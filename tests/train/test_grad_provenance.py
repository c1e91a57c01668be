import pytest
import torch
from conftest import tiny_model
from helpers import is_tied, lm_loss

from tying.train.grad_provenance import GradientTap


def backward(model, tap, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, 64, (4, 12), generator=g)
    y = torch.randint(0, 64, (4, 12), generator=g)
    model.zero_grad(set_to_none=True)
    lm_loss(tap(input_ids=x).logits, y).backward()
    return x


def untied_copy(tied_model, family):
    """An untied model whose input and output matrices are both copies of the tied matrix."""
    untied = tiny_model(family, tied=False)
    state = tied_model.state_dict()
    untied.load_state_dict(state, strict=False)
    untied.get_output_embeddings().weight.data.copy_(tied_model.get_input_embeddings().weight.data)
    untied.get_input_embeddings().weight.data.copy_(tied_model.get_input_embeddings().weight.data)
    return untied


@pytest.mark.parametrize("family", ["olmo", "gpt_neox"])
def test_tied_parts_sum_to_the_shared_gradient(family):
    model = tiny_model(family, tied=True)
    tap = GradientTap(model)
    backward(model, tap)
    grad = model.get_input_embeddings().weight.grad
    assert torch.allclose(tap.g_in + tap.g_out, grad, atol=1e-6, rtol=1e-5)
    assert tap.g_in.norm() > 0 and tap.g_out.norm() > 0


@pytest.mark.parametrize("family", ["olmo", "gpt_neox"])
def test_parts_equal_the_gradients_of_an_untied_twin(family):
    """Independent check: untie the matrix into two equal copies; each copy's gradient is one path."""
    tied = tiny_model(family, tied=True)
    tap = GradientTap(tied)
    backward(tied, tap)
    twin = untied_copy(tied, family)
    backward(twin, GradientTap(twin))
    assert torch.allclose(tap.g_in, twin.get_input_embeddings().weight.grad, atol=1e-6)
    assert torch.allclose(tap.g_out, twin.get_output_embeddings().weight.grad, atol=1e-6)


def test_lookup_path_is_the_scattered_embedding_output_gradient():
    model = tiny_model("olmo", tied=True)
    captured = {}

    def capture(module, args, out):
        out.register_hook(lambda g: captured.setdefault("g", g.detach().clone()))

    model.get_input_embeddings().register_forward_hook(capture)
    tap = GradientTap(model)
    x = backward(model, tap)
    scattered = torch.zeros_like(tap.g_in_raw).index_add_(0, x.reshape(-1), captured["g"].reshape(-1, 16))
    assert torch.allclose(tap.g_in_raw, scattered, atol=1e-7)
    assert tap.proxy == pytest.approx(captured["g"].norm().item(), rel=1e-6)
    untouched = torch.ones(64, dtype=torch.bool)
    untouched[x.reshape(-1)] = False
    assert tap.g_in_raw[untouched].abs().max() == 0


def test_input_scale_multiplies_only_the_lookup_path():
    k = 5.0
    plain, scaled = tiny_model(tied=True), tiny_model(tied=True)
    tap1, tapk = GradientTap(plain), GradientTap(scaled, input_grad_scale=k)
    backward(plain, tap1)
    backward(scaled, tapk)
    assert torch.allclose(tapk.g_in, k * tapk.g_in_raw, rtol=1e-6, atol=1e-8)
    assert torch.allclose(tapk.g_in_raw, tap1.g_in_raw, atol=1e-7)
    assert torch.allclose(tapk.g_out, tap1.g_out, atol=1e-7)
    shared = scaled.get_input_embeddings().weight.grad
    assert torch.allclose(shared, k * tapk.g_in_raw + tapk.g_out, atol=1e-6, rtol=1e-5)
    body = dict(plain.named_parameters())["model.layers.0.mlp.up_proj.weight"].grad
    assert torch.allclose(dict(scaled.named_parameters())["model.layers.0.mlp.up_proj.weight"].grad, body)
    norms = tapk.norms()
    assert norms["g_in"] == pytest.approx(k * norms["g_in_raw"], rel=1e-5)
    assert norms["out_share"] == pytest.approx(norms["g_out"] / (norms["g_in"] + norms["g_out"]))


@pytest.mark.parametrize("family", ["olmo", "gpt_neox", "llama", "qwen3"])
def test_tied_shares_one_tensor_untied_has_two(family):
    tied, untied = tiny_model(family, tied=True), tiny_model(family, tied=False)
    assert is_tied(tied)
    assert tied.get_input_embeddings().weight.data_ptr() == tied.get_output_embeddings().weight.data_ptr()
    assert not is_tied(untied)
    assert untied.get_input_embeddings().weight.data_ptr() != untied.get_output_embeddings().weight.data_ptr()

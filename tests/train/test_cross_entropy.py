"""The fused next-token loss equals the plain F.cross_entropy path: loss and gradients, chunked or not,
through a model and through the gradient tap."""

import pytest
import torch
import torch.nn.functional as F
from conftest import tiny_model
from helpers import lm_loss

from tying.train.cross_entropy import NextTokenLoss, linear_cross_entropy
from tying.train.grad_provenance import GradientTap


def inputs(n=48, d=16, vocab=64, scale=1.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    hidden = torch.randn(2, n // 2, d, generator=g).requires_grad_()
    weight = (scale * torch.randn(vocab, d, generator=g)).requires_grad_()
    return hidden, weight, torch.randint(0, vocab, (2, n // 2), generator=g)


def plain(hidden, weight, targets):
    return F.cross_entropy((hidden @ weight.t()).reshape(-1, weight.shape[0]), targets.reshape(-1))


@pytest.mark.parametrize("chunk_rows", [None, 48, 7, 1])
@pytest.mark.parametrize("scale", [1.0, 30.0])  # at 30 some targets' probabilities are far below 1e-38
def test_loss_and_gradients_equal_the_plain_path(chunk_rows, scale):
    hidden, weight, targets = inputs(scale=scale)
    ref = plain(hidden, weight, targets)
    ref_h, ref_w = torch.autograd.grad(0.25 * ref, (hidden, weight))  # a grad_output other than 1
    loss = linear_cross_entropy(hidden, weight, targets, chunk_rows)
    grad_h, grad_w = torch.autograd.grad(0.25 * loss, (hidden, weight))
    assert loss.dtype == torch.float32 and loss.shape == ()
    torch.testing.assert_close(loss, ref, rtol=1e-6, atol=1e-6)
    assert grad_h.shape == hidden.shape and grad_w.shape == weight.shape
    for grad, ref_grad in ((grad_h, ref_h), (grad_w, ref_w)):  # float rounding of sums over 64 or 48 terms
        torch.testing.assert_close(grad, ref_grad, rtol=1e-5, atol=1e-5 * ref_grad.abs().max().item())


def test_without_gradients_gives_the_same_loss():
    hidden, weight, targets = inputs()
    with torch.no_grad():
        loss = linear_cross_entropy(hidden, weight, targets, 5)
    assert not loss.requires_grad
    torch.testing.assert_close(loss, plain(hidden, weight, targets).detach(), rtol=1e-6, atol=1e-6)


def test_bfloat16_autocast_follows_the_plain_autocast_path():
    hidden, weight, targets = inputs()
    with torch.autocast("cpu", torch.bfloat16):
        ref = lm_loss(hidden @ weight.t(), targets)
        loss = linear_cross_entropy(hidden, weight, targets, 7)
    ref_h, ref_w = torch.autograd.grad(ref, (hidden, weight))
    grad_h, grad_w = torch.autograd.grad(loss, (hidden, weight))
    assert loss.dtype == torch.float32 and grad_h.dtype == grad_w.dtype == torch.float32
    torch.testing.assert_close(loss, ref, rtol=1e-3, atol=1e-3)
    torch.testing.assert_close(grad_h, ref_h, rtol=2e-2, atol=1e-3)
    torch.testing.assert_close(grad_w, ref_w, rtol=2e-2, atol=1e-3)


@pytest.mark.parametrize("family", ["olmo", "gpt_neox", "llama", "qwen3"])
@pytest.mark.parametrize("tied", [True, False])
def test_a_model_s_fused_loss_equals_its_logits_loss(family, tied):
    fused_model, plain_model = tiny_model(family, tied=tied), tiny_model(family, tied=tied)
    g = torch.Generator().manual_seed(1)
    x, y = torch.randint(0, 64, (3, 12), generator=g), torch.randint(0, 64, (3, 12), generator=g)
    fused = NextTokenLoss(fused_model)(input_ids=x, targets=y)
    ref = lm_loss(plain_model(input_ids=x).logits, y)
    torch.testing.assert_close(fused, ref, rtol=1e-6, atol=1e-6)
    fused.backward()
    ref.backward()
    for (name, a), (_, b) in zip(fused_model.named_parameters(), plain_model.named_parameters()):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-5, atol=1e-7, msg=name)


@pytest.mark.parametrize("scale", [1.0, 5.0])
def test_the_tap_on_the_fused_loss_splits_the_gradient_as_on_the_logits(scale):
    """Tied: the lookup and projection parts of the fused path equal the plain path's and sum to the
    shared matrix's gradient (scaled on the lookup side)."""
    fused_model, plain_model = tiny_model(tied=True), tiny_model(tied=True)
    fused_tap, plain_tap = GradientTap(fused_model, scale), GradientTap(plain_model, scale)
    g = torch.Generator().manual_seed(2)
    x, y = torch.randint(0, 64, (4, 12), generator=g), torch.randint(0, 64, (4, 12), generator=g)
    fused_tap(input_ids=x, targets=y).backward()
    lm_loss(plain_tap(input_ids=x).logits, y).backward()
    torch.testing.assert_close(fused_tap.g_in_raw, plain_tap.g_in_raw, rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(fused_tap.g_out, plain_tap.g_out, rtol=1e-5, atol=1e-7)
    assert fused_tap.proxy == pytest.approx(plain_tap.proxy, rel=1e-5)
    shared = fused_model.get_input_embeddings().weight.grad
    torch.testing.assert_close(fused_tap.g_in + fused_tap.g_out, shared, rtol=1e-5, atol=1e-6)
    assert fused_tap.g_in.norm() > 0 and fused_tap.g_out.norm() > 0


def test_the_backward_keeps_no_tokens_by_vocabulary_tensor():
    """What autograd saves for the backward pass: the hidden states' and the matrix's gradients, (tokens, d) and
    (V, d); the plain path keeps (tokens, V) log-probabilities."""
    hidden, weight, targets = inputs(n=48, d=16, vocab=64)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(tuple(t.shape)) or t, lambda t: t):
        linear_cross_entropy(hidden, weight, targets, 7)
    assert sorted(saved) == [(48, 16), (64, 16)]
    saved.clear()
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(tuple(t.shape)) or t, lambda t: t):
        plain(hidden, weight, targets)
    assert (48, 64) in saved

"""A causal LM's next-token cross-entropy with its output projection fused in, one (rows x V) buffer at a time.

The plain path forms the (tokens x V) logits, their log-softmax, the one-hot gradient of the loss
and the gradient of the logits: four (tokens x V) buffers and as many passes over them. Here each
chunk of rows has one buffer: its logits, turned in place into its softmax and then into
softmax - one-hot, which is the loss's gradient for those rows up to the 1 / tokens of the mean.
Both gradients (of the hidden states and of the projection matrix) are formed from that buffer in
the forward pass, so the backward pass only scales them; the loss and gradients equal the plain
F.cross_entropy path's to float rounding. The projection's gradient reaches whatever tensor was
passed as `weight`, so the gradient tap's output-path alias sees it as it sees the plain path's.
"""

import torch
from torch import nn

# Logits per buffer: 2^20 (4 MiB in fp32; 256 of the default config's 1,024 rows at a time), or as many as the
# projection's own (V, d) gradient holds where that is larger, so that each chunk's update of that gradient (a
# product over the chunk's rows) does d or more multiply-adds per element it reads and writes. One 16 MiB buffer
# for the whole batch made a default training step 10% slower (74.7 against 67.7 ms on a 1-thread, 184 GFLOP/s
# Xeon; 2^18 to 2^21 within 3 ms of 2^20): each pass over it (product, softmax, gradient products) left the cache.
CHUNK_ELEMENTS = 1 << 20


def linear_cross_entropy(hidden, weight, targets, chunk_rows=None):
    """Mean cross-entropy (nats, fp32 0-d tensor) of the logits hidden @ weight.T against `targets`.

    hidden (..., d), weight (V, d), targets (...) int64 with the same leading shape as hidden.
    Under autocast the two products run in the autocast dtype and the softmax in fp32, as the
    plain path's autocast logits followed by `.float()` do. chunk_rows: rows per buffer (default:
    CHUNK_ELEMENTS // V, or d where that is more)."""
    return _LinearCrossEntropy.apply(hidden, weight, targets, chunk_rows)


class NextTokenLoss(nn.Module):
    """`lm`'s mean next-token loss: its decoder body, then `linear_cross_entropy` on its output
    projection's weight (no bias in the families trained here). Parameters are `lm`'s, named
    "lm.<name>"; called as loss(input_ids=..., targets=...)."""

    def __init__(self, lm):
        super().__init__()
        self.lm = lm

    def forward(self, input_ids, targets):
        head = self.lm.get_output_embeddings()
        if getattr(head, "bias", None) is not None:
            raise ValueError("linear_cross_entropy takes an output projection without bias")
        hidden = self.lm.base_model(input_ids=input_ids).last_hidden_state
        return linear_cross_entropy(hidden, head.weight, targets)


class _LinearCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden, weight, targets, chunk_rows):
        device = hidden.device.type
        dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else weight.dtype
        h = hidden.reshape(-1, hidden.shape[-1])
        t = targets.reshape(-1)
        n, vocab = len(t), weight.shape[0]
        needs_h, needs_w = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        rows = chunk_rows or max(CHUNK_ELEMENTS // vocab, h.shape[1])
        with torch.autocast(device, enabled=False):
            w = weight.to(dtype)
            grad_h = torch.empty(n, h.shape[1], dtype=dtype, device=h.device) if needs_h else None
            grad_w = torch.zeros(weight.shape, dtype=torch.float32, device=h.device) if needs_w else None
            losses = torch.empty(n, dtype=torch.float32, device=h.device)
            buffer = torch.empty(min(rows, n), vocab, dtype=torch.float32, device=h.device)
            for start in range(0, n, rows):
                hc, tc = h[start : start + rows].to(dtype), t[start : start + rows, None]
                z = buffer[: len(tc)]
                if dtype == torch.float32:
                    torch.mm(hc, w.t(), out=z)
                else:
                    z.copy_(hc @ w.t())
                top = z.amax(1, keepdim=True)
                target_logit = z.gather(1, tc)
                torch.ops.aten._softmax.out(z, 1, False, out=z)  # in place: the kernel reads each row's max first
                # log sum exp = max logit - log max p, as the largest p is exp(0) / sum exactly
                losses[start : start + len(tc)] = (top - z.amax(1, keepdim=True).log() - target_logit).squeeze(1)
                if not (needs_h or needs_w):
                    continue
                z.scatter_add_(1, tc, torch.full_like(target_logit, -1.0))
                g = z if dtype == torch.float32 else z.to(dtype)
                if needs_h:
                    torch.mm(g, w, out=grad_h[start : start + len(tc)])
                if needs_w:
                    grad_w.add_(g.t() @ hc) if dtype != torch.float32 else grad_w.addmm_(g.t(), hc)
        ctx.hidden_shape, ctx.hidden_dtype, ctx.weight_dtype, ctx.n = hidden.shape, hidden.dtype, weight.dtype, n
        ctx.save_for_backward(grad_h, grad_w)
        return losses.sum() / n

    @staticmethod
    def backward(ctx, grad_loss):
        grad_h, grad_w = ctx.saved_tensors
        scale = grad_loss / ctx.n
        dh = None if grad_h is None else (grad_h * scale).to(ctx.hidden_dtype).reshape(ctx.hidden_shape)
        dw = None if grad_w is None else (grad_w * scale).to(ctx.weight_dtype)
        return dh, dw, None, None

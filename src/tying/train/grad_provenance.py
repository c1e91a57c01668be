"""Exact split of the embedding gradient into its lookup (input) and projection (output) paths.

The model runs through `torch.func.functional_call` with the input embedding and the output
projection replaced by two aliases (views) of their parameters. Autograd then delivers the
lookup-path gradient (the embedding-output gradient scatter-added into token rows) to the input
alias and the projection-path gradient ((dL/dlogits)^T h_final) to the output alias, and sums
them into the parameter as usual. Hooks on the aliases record both parts at no extra matmul and
multiply the lookup path by `input_grad_scale`, leaving the output path untouched. For a tied
model, G_in(effective) + G_out is the shared matrix's gradient.
"""

from torch.func import functional_call

from tying.train.cross_entropy import NextTokenLoss
from tying.train.models import embedding_names


class GradientTap:
    """Runs `model` so that each backward pass records the input- and output-path gradients.

    After the backward passes of one step: `g_in_raw`, `g_in` (= input_grad_scale * g_in_raw)
    and `g_out` are (V, d) tensors, and `proxy` is ||dL/d(embedding output)||, the paper code's
    stand-in for the input side. Backward passes accumulate (gradient accumulation) until
    `reset()`. Untied models are tapped the same way (their two matrices' gradients).
    """

    def __init__(self, model, input_grad_scale=1.0):
        self.model = model
        self.scale = float(input_grad_scale)
        self.in_name, self.out_name = embedding_names(model)
        self.reset()
        model.get_input_embeddings().register_forward_hook(self._on_embedding_output)
        self._loss = NextTokenLoss(model)

    def reset(self):
        """Forget the recorded gradients: call before each optimizer step's first backward pass."""
        self.g_in_raw = self.g_out = None
        self.proxy_sq = 0.0

    @property
    def g_in(self):
        return self.g_in_raw if self.scale == 1.0 else self.g_in_raw * self.scale

    @property
    def proxy(self):
        return self.proxy_sq**0.5

    def __call__(self, **inputs):
        """Forward pass of the wrapped model with the path hooks in place: the model's outputs, or
        with `targets` (input_ids shifted by one) the mean next-token loss of
        `tying.train.cross_entropy.NextTokenLoss` (logits, softmax and gradient in one buffer)."""
        alias_in = _alias(self.model.get_input_embeddings().weight)
        alias_out = _alias(self.model.get_output_embeddings().weight)
        alias_in.register_hook(self._on_input_path)
        alias_out.register_hook(self._on_output_path)
        module, prefix = (self._loss, "lm.") if "targets" in inputs else (self.model, "")
        return functional_call(
            module,
            {prefix + self.in_name: alias_in, prefix + self.out_name: alias_out},
            args=(),
            kwargs=inputs,
            tie_weights=False,
            strict=False,
        )

    def _on_input_path(self, grad):
        self.g_in_raw = _accumulate(self.g_in_raw, grad)
        return None if self.scale == 1.0 else grad * self.scale

    def _on_output_path(self, grad):
        self.g_out = _accumulate(self.g_out, grad)

    def _on_embedding_output(self, module, args, output):
        if output.requires_grad:
            output.register_hook(self._on_proxy)

    def _on_proxy(self, grad):
        self.proxy_sq += grad.detach().double().pow(2).sum().item()

    def norms(self):
        """Frobenius norms of the recorded parts and the output share of the step."""
        g_in_raw, g_out = self.g_in_raw.norm().item(), self.g_out.norm().item()
        g_in = g_in_raw * self.scale
        return {
            "g_in_raw": g_in_raw,
            "g_in": g_in,
            "g_out": g_out,
            "out_share": g_out / (g_in + g_out),
            "proxy": self.proxy,
        }


def _accumulate(total, grad):
    """total + grad, starting from a copy (autograd may reuse `grad`'s buffer for the parameter)."""
    return grad.detach().clone() if total is None else total.add_(grad.detach())


def _alias(weight):
    """A view of `weight` whose gradient hooks see only the path that uses it."""
    return weight.view_as(weight)

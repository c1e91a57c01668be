"""Training speed at the default config: tokens/s, model FLOP/s against a measured fp32 GEMM peak,
and the overhead of exact gradient provenance. Prints figures; asserts nothing.

    .venv/bin/python benchmarks/train_bench.py [--config config.yaml] [--arch olmo] [--threads 2] [--steps 30]

Targets: model FLOP/s at least 0.6 of the GEMM peak at the default size; provenance at most 10% of
step time.
"""
import argparse
import time

import numpy as np
import torch
import yaml

from tying.config import check, run_params
from tying.train import RunSpec, build, lm_loss, train_batch


def gemm_peak(n=2048, repeats=10):
    """fp32 GFLOP/s of an n x n matmul, best of `repeats`."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    best = min(_timed(lambda: a @ b) for _ in range(repeats))
    return 2 * n**3 / best / 1e9


def _timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def flops_per_token(spec):
    """Training FLOPs per token: 3 x forward (2 per matmul weight, plus causal attention scores)."""
    d, layers, seq = spec.hidden_size, spec.layers, spec.seq_len
    ffn = spec.intermediate_size or 4 * d
    mlp_mats = 3 if spec.family in ("olmo", "llama", "qwen3") else 2
    per_layer = 4 * d * d + mlp_mats * d * ffn
    forward = 2 * (layers * per_layer + spec.vocab_size * d) + layers * 2 * seq * d
    return 3 * forward


def step_times(spec, ids, steps, provenance):
    """Seconds per optimizer step (median after two warm-up steps), with or without the tap."""
    model, tap, opt, _ = build(spec, "cpu")
    forward = tap if provenance else model
    times = []
    for step in range(1, steps + 3):
        x, y = train_batch(ids, step, 0, spec.batch_size, spec.seq_len)
        t = time.perf_counter()
        loss = lm_loss(forward(input_ids=x).logits, y)
        loss.backward()
        if provenance:
            tap.norms()
        torch.nn.utils.clip_grad_norm_(model.parameters(), spec.grad_clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - t)
    return float(np.median(times[2:]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="config.yaml")
    parser.add_argument("--arch", default="olmo")
    parser.add_argument("--variant", default="tied")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    config = yaml.safe_load(open(args.config))
    check(config, "workflow/schemas/config.schema.yaml")
    vocab = config["tokenizer"]["vocab_size"]
    params = {**run_params(config, args.arch, args.variant), "checkpoints": (0,)}
    spec = RunSpec(**params, seed=0, vocab_size=vocab, eos_id=0)
    ids = np.random.default_rng(0).integers(0, vocab, 200_000).astype(np.uint16)

    peak = gemm_peak()
    plain = step_times(spec, ids, args.steps, provenance=False)
    tapped = step_times(spec, ids, args.steps, provenance=True)
    tokens = spec.batch_size * spec.seq_len
    achieved = flops_per_token(spec) * tokens / tapped / 1e9
    print(f"model            {spec.family} d={spec.hidden_size} layers={spec.layers} V={vocab} "
          f"batch={spec.batch_size}x{spec.seq_len}, {args.threads} thread(s)")
    print(f"fp32 GEMM peak   {peak:8.1f} GFLOP/s (2048x2048 matmul)")
    print(f"step time        {tapped * 1e3:8.1f} ms with provenance, {plain * 1e3:.1f} ms without")
    print(f"tokens/s         {tokens / tapped:8.0f}")
    print(f"model FLOP/s     {achieved:8.1f} GFLOP/s = {achieved / peak:.2f} of peak (target >= 0.6)")
    print(f"provenance cost  {100 * (tapped - plain) / plain:8.1f} % of step time (target <= 10%)")


if __name__ == "__main__":
    main()

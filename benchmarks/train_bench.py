"""Training speed at the default config: model FLOP/s against measured fp32 GEMM peaks, the provenance
overhead, where a step's time goes, and what a checkpoint costs. Prints figures; asserts nothing.

    .venv/bin/python benchmarks/train_bench.py [--config config.yaml] [--arch olmo] [--threads 1] [--steps 20]
        [--record [NOTE]]

Targets: model FLOP/s at least 0.6 of the single-thread GEMM peak at the default size; provenance at
most 10% of step time. The cores may be shared, so step times are reported as process CPU time (what
the step costs) beside wall time (what it took under this machine's load); FLOP/s use the CPU time,
which with one thread is the step's time on its core. The tapped and plain steps alternate in rounds
so a change of load affects both alike.
"""

import argparse
import os
import resource
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import records
import torch
import transformers
from torch.profiler import ProfilerActivity, profile

from tying.data.batches import train_batch
from tying.plan.config import prepared
from tying.plan.run_params import run_params
from tying.plan.run_spec import RunSpec
from tying.runtime import keep_freed_memory
from tying.train.cross_entropy import NextTokenLoss
from tying.train.loop import build, save_checkpoint


def gemm_peak(threads, n=2048, repeats=10):
    """fp32 GFLOP/s of an n x n matmul on `threads` threads, best of `repeats`: (by wall time, by CPU time
    per thread x threads). On shared cores the CPU-time figure is the robust one for one thread."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    times = [_timed(lambda: a @ b) for _ in range(repeats)]
    torch.set_num_threads(before)
    wall, cpu = min(t[0] for t in times), min(t[1] for t in times)
    return 2 * n**3 / wall / 1e9, 2 * n**3 / (cpu / threads) / 1e9


def _timed(fn):
    """(wall seconds, process CPU seconds) of fn()."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def flops_per_token(spec):
    """Training FLOPs per token: 3 x forward (2 per matmul weight, plus causal attention scores)."""
    d, layers, seq = spec.hidden_size, spec.layers, spec.seq_len
    ffn = spec.intermediate_size or 4 * d
    mlp_mats = 3 if spec.family in ("olmo", "llama", "qwen3") else 2
    per_layer = 4 * d * d + mlp_mats * d * ffn
    forward = 2 * (layers * per_layer + spec.vocab_size * d) + layers * 2 * seq * d
    return 3 * forward


class Stepper:
    """One run's training steps exactly as tying.train.loop takes them, with or without the gradient tap."""

    def __init__(self, spec, ids, provenance):
        self.spec, self.ids, self.provenance = spec, ids, provenance
        self.model, self.tap, self.opt, self.sched = build(spec, "cpu")
        self.loss = self.tap if provenance else NextTokenLoss(self.model)
        self.step_no = 0

    def __call__(self):
        spec, tap = self.spec, self.tap
        self.step_no += 1
        x, y = train_batch(self.ids, self.step_no, spec.seed, spec.batch_size, spec.seq_len)
        tap.reset()
        loss = self.loss(input_ids=x, targets=y)
        loss.backward()
        if self.provenance:
            tap.norms()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), spec.grad_clip)
        loss.item()
        self.opt.step()
        self.sched.step()
        self.opt.zero_grad(set_to_none=True)


def step_times(spec, ids, steps, rounds=4):
    """{provenance: (CPU seconds, wall seconds, page faults, kernel CPU seconds) per step}: medians of the
    times, means of the rest; tapped and plain alternate in rounds."""
    runs = {True: Stepper(spec, ids, True), False: Stepper(spec, ids, False)}
    times, kernel = defaultdict(list), defaultdict(list)
    for run in runs.values():  # warm-up
        run(), run()
    for _ in range(rounds):
        for provenance, run in runs.items():
            for _ in range(max(1, steps // rounds)):
                usage, cpu, wall = resource.getrusage(resource.RUSAGE_SELF), time.process_time(), time.perf_counter()
                run()
                times[provenance].append((time.process_time() - cpu, time.perf_counter() - wall))
                after = resource.getrusage(resource.RUSAGE_SELF)
                kernel[provenance].append((after.ru_minflt - usage.ru_minflt, after.ru_stime - usage.ru_stime))
    return {k: (*np.median(times[k], axis=0), *np.mean(kernel[k], axis=0)) for k in runs}


MATMULS = ("aten::mm", "aten::addmm", "aten::addmm_", "aten::bmm")  # addmm_: the fused loss's (V, d) gradient
CATEGORIES = (  # (name, test on an operator's name and input shapes), first match wins
    ("output projection matmuls (V-wide)", lambda name, shapes, vocab: name in MATMULS and vocab in sum(shapes, [])),
    ("softmax, loss and embedding gradient (V-wide)", lambda name, shapes, vocab: vocab in sum(shapes, [])),
    ("other matmuls", lambda name, shapes, vocab: name in MATMULS),
    ("attention kernel", lambda name, shapes, vocab: "scaled_dot_product" in name),
    ("norm kernels", lambda name, shapes, vocab: "norm" in name and "vector_norm" not in name),
    (
        "optimizer and clipping",
        lambda name, shapes, vocab: name.startswith(
            ("aten::_foreach", "aten::lerp", "aten::addc", "aten::linalg_vector")
        ),
    ),
)


def step_profile(spec, ids, steps=8):
    """Share of profiled CPU time per category of operator, over `steps` tapped steps."""
    run = Stepper(spec, ids, True)
    run(), run()
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(steps):
            run()
    shares = defaultdict(float)
    for event in prof.key_averages(group_by_input_shape=True):
        if event.self_cpu_time_total <= 0:
            continue
        shapes = [list(s) for s in event.input_shapes if isinstance(s, (list, tuple))]
        name = next(
            (n for n, test in CATEGORIES if test(event.key, shapes, spec.vocab_size)),
            "elementwise, copies, autograd and hook overhead",
        )
        shares[name] += event.self_cpu_time_total
    total = sum(shares.values())
    return {name: value / total for name, value in sorted(shares.items(), key=lambda kv: -kv[1])}


def checkpoint_cost(spec, ids, repeats=3):
    """CPU seconds of one checkpoint (evaluation, save_pretrained export, full-state save)."""
    run = Stepper(spec, ids, True)
    run()
    val = [train_batch(ids, 10**6 + i, spec.seed, spec.batch_size, spec.seq_len) for i in range(spec.eval_batches)]
    tokenizer = _Tokenizer()
    costs = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(repeats):
            cpu = time.process_time()
            save_checkpoint(
                spec,
                run.model,
                run.opt,
                run.sched,
                tokenizer,
                val,
                "cpu",
                i + 1,
                [{}],
                [],
                Path(tmp) / "state.pt",
                Path(tmp) / "exports",
            )
            costs.append(time.process_time() - cpu)
    return float(np.median(costs))


class _Tokenizer:
    """Stands in for the run's tokenizer: the export's tokenizer files are not what is timed."""

    def save_pretrained(self, directory):
        pass


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="config.yaml")
    parser.add_argument("--arch", default="olmo")
    parser.add_argument("--variant", default="tied")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--steps", type=int, default=20, help="timed steps of each kind")
    parser.add_argument("--no-heap", action="store_true", help="leave glibc's malloc thresholds as they are")
    records.add_flag(parser)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if not args.no_heap:
        keep_freed_memory()
    config = prepared(args.config, launch_dir=Path.cwd(), replace=True).config
    vocab = config["tokenizer"]["vocab_size"]
    spec = RunSpec(**run_params(config, args.arch, args.variant), seed=0, vocab_size=vocab, eos_id=0)
    ids = np.random.default_rng(0).integers(0, vocab, 200_000).astype(np.uint16)

    transformers.utils.logging.disable_progress_bar()
    load = os.getloadavg()[0]
    (peak1_wall, peak1), (peak2, _) = gemm_peak(1), gemm_peak(2)
    times = step_times(spec, ids, args.steps)
    (tapped_cpu, tapped_wall, faults, kernel), (plain_cpu, plain_wall, *_) = times[True], times[False]
    tokens = spec.batch_size * spec.seq_len
    flops = flops_per_token(spec) * tokens
    per_cpu, per_wall = flops / tapped_cpu / 1e9, flops / tapped_wall / 1e9
    checkpoint = checkpoint_cost(spec, ids)
    run_cpu = spec.steps * tapped_cpu + len(spec.checkpoints) * checkpoint
    print(
        f"model            {spec.family} d={spec.hidden_size} layers={spec.layers} V={vocab} "
        f"batch={spec.batch_size}x{spec.seq_len}, {args.threads} thread(s), "
        f"heap {'as glibc sets it' if args.no_heap else 'keeps freed memory (tying.runtime)'}"
    )
    print(f"machine          {os.cpu_count()} CPUs, load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} now")
    print(
        f"fp32 GEMM peak   {peak1:8.1f} GFLOP/s on 1 thread by CPU time ({peak1_wall:.1f} by wall time), "
        f"{peak2:.1f} on 2 threads by wall time (2048x2048 matmul)"
    )
    print(
        f"step time        {tapped_cpu * 1e3:8.1f} ms CPU ({tapped_wall * 1e3:.1f} ms wall) with provenance, "
        f"{plain_cpu * 1e3:.1f} ms CPU ({plain_wall * 1e3:.1f} ms wall) without"
    )
    print(
        f"kernel           {faults:8.0f} page faults and {kernel * 1e3:.1f} ms of kernel CPU time per step "
        f"(part of the CPU time above)"
    )
    print(f"tokens/s         {tokens / tapped_cpu:8.0f} per CPU second ({tokens / tapped_wall:.0f} per wall second)")
    print(
        f"model FLOP/s     {per_cpu:8.1f} GFLOP/s = {per_cpu / peak1:.2f} of the 1-thread peak "
        f"(target >= 0.6); by wall time {per_wall:.1f} = {per_wall / peak1:.2f}"
    )
    print(f"provenance cost  {100 * (tapped_cpu - plain_cpu) / plain_cpu:8.1f} % of step CPU time (target <= 10%)")
    share = len(spec.checkpoints) * checkpoint / run_cpu
    print(
        f"checkpoint       {checkpoint:8.2f} s CPU each (evaluate, export, state); a run of {spec.steps} steps "
        f"and {len(spec.checkpoints)} checkpoints: {run_cpu:.1f} s CPU, {share:.0%} of it in checkpoints"
    )
    print("where a step's CPU time goes (torch profiler, self time; the profiler inflates small operators):")
    shares = step_profile(spec, ids)
    for name, share in shares.items():
        print(f"  {share:6.1%}  {name}")
    if args.record is not None:
        figures = [
            ("step CPU", round(tapped_cpu * 1e3, 1), "ms"),
            ("step CPU without provenance", round(plain_cpu * 1e3, 1), "ms"),
            ("tokens per CPU second", round(tokens / tapped_cpu), "tokens/s"),
            ("model FLOP/s", round(per_cpu, 1), "GFLOP/s"),
            ("fraction of peak", round(per_cpu / peak1, 2), ""),
            ("provenance overhead", round(100 * (tapped_cpu - plain_cpu) / plain_cpu, 1), "%"),
            ("checkpoint", round(checkpoint, 2), "s CPU"),
        ]
        figures += [(f"share: {name}", round(100 * share, 1), "% of step") for name, share in shares.items()]
        setting = (
            f"{spec.family} {args.variant} d={spec.hidden_size} layers={spec.layers} V={vocab}, "
            f"{args.threads} thread{'s' if args.threads > 1 else ''}{', glibc heap' if args.no_heap else ''}"
        )
        records.append(figures, peak=peak1, setting=setting, note=args.record)


if __name__ == "__main__":
    main()

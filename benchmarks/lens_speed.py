"""A tuned-lens step against its readout bound, and a lens job's CPU seconds, old code against new.

Step (the default): trains the config's lens (its recipe: optimizer, lr, init, batch 8 x 64 tokens)
on a default-shape model (OLMo, hidden 96, 3 layers, vocab 4096), and times each step against the
GEMMs it cannot avoid: the seven (512 x 96) x (96 x 4096) readout products (the logits of the L + 1 = 4
states, forward, and of the L = 3 translated ones, backward), in the dtype the recipe's train_dtype
resolves to here (tying.lens.unembed.product_dtype), timed right after every step in the
same process (an optimizer step hook), so a shared machine's load slows both alike. Prints the
median step, the bound at the measured GEMM rate, their ratio, and the model's own forward (its
states, which the seven products leave out), with the 1-thread fp32 GEMM peak (2048^3) beside them.
The model is BUILD's olmo/tied/seed0 checkpoint with `--build BUILD`, else one trained here on a
synthetic Markov stream (cached under benchmarks/out/).

Job (`--job BUILD`): one lens job's CPU seconds, a subprocess running workflow/scripts/lens.py as
snakemake would (import, load, train, evaluate, write) on BUILD's olmo/tied/seed0 checkpoint, for this
checkout and for `--old DIR` (another checkout, e.g. `git worktree add /tmp/old 2ded633`), each with
its own config.yaml's `lens:` section, alternately, `--repeats` times each.

Usage: .venv/bin/python benchmarks/lens_speed.py [--build BUILD] [--steps 60] [--threads 1] [--src DIR]
       .venv/bin/python benchmarks/lens_speed.py --job BUILD [--old /tmp/old] [--repeats 2]
--src DIR times DIR's code (its src/ first on the path, its config.yaml's recipe) instead of this checkout's.
--record [NOTE] appends the figures to benchmarks/records.csv (benchmarks/records.py).
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import records

ROOT = Path(__file__).resolve().parents[1]
VOCAB, SEQ = 4096, 64
MODEL_DIR = ROOT / "benchmarks" / "out" / "lens_speed_model"
RUN = "olmo/tied/seed0"


def markov_tokens(n, seed):
    """A stream where each token has 4 likely successors: (n,) uint16."""
    import numpy as np

    rng = np.random.default_rng(seed)
    successors = rng.integers(0, VOCAB, size=(VOCAB, 4))
    weights = np.array([0.55, 0.25, 0.15, 0.05])
    out = np.empty(n, dtype=np.uint16)
    out[0] = 0
    choice = rng.choice(4, size=n, p=weights)
    for i in range(1, n):
        out[i] = successors[out[i - 1], choice[i]]
    return out


def synthetic_model(tokens):
    """The benchmark model, trained once (200 Adam steps) and cached under benchmarks/out/."""
    import numpy as np
    import torch
    from transformers import AutoModelForCausalLM, OlmoConfig

    if not MODEL_DIR.exists():
        torch.manual_seed(0)
        config = OlmoConfig(
            vocab_size=VOCAB,
            hidden_size=96,
            num_hidden_layers=3,
            num_attention_heads=4,
            intermediate_size=384,
            max_position_embeddings=SEQ,
            tie_word_embeddings=True,
        )
        model = AutoModelForCausalLM.from_config(config)
        opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
        rng = np.random.default_rng(0)
        for _ in range(200):
            starts = rng.integers(0, len(tokens) - SEQ, size=16)
            ids = torch.from_numpy(np.stack([tokens[s : s + SEQ].astype(np.int64) for s in starts]))
            loss = model(input_ids=ids, labels=ids).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
        model.save_pretrained(MODEL_DIR)
    return MODEL_DIR


def gemm_peak(repeats=5, n=2048):
    """fp32 GFLOP/s of an n^3 product on this process's threads, by CPU time, best of `repeats`."""
    import torch

    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    best = min(_cpu(lambda: a @ b) for _ in range(repeats))
    return 2 * n**3 / best / 1e9 / torch.get_num_threads()


def step_benchmark(args, code):
    """Time `args.steps` lens steps of `code`'s train_lens against the seven-product bound."""
    import numpy as np
    import torch
    import yaml
    from torch.optim.optimizer import register_optimizer_step_post_hook

    from tying.lens.fitting import recipe, train_lens
    from tying.lens.unembed import product_dtype
    from tying.runtime import configure
    from tying.train.models import frozen_model

    configure(args.threads)
    cfg = yaml.safe_load((code / "config.yaml").read_text())["lens"]
    if args.build:
        from tying.data.tokens import load_ids

        tokens = args.build / "results" / "tokens"
        train = load_ids(tokens / "train.json", tokens / "meta.json")
        path = args.build / "results" / "checkpoints" / RUN / f"step{_last_step(args.build)}"
    else:
        train = markov_tokens(300_000, seed=1)
        path = synthetic_model(train)
    model = frozen_model(path)
    n_tokens, d = cfg["batch_size"] * cfg["seq_len"], model.config.hidden_size
    dtype = product_dtype(recipe(cfg)["train_dtype"], "cpu")
    weight = model.get_output_embeddings().weight.detach().to(dtype)
    n_blocks = model.config.num_hidden_layers
    z, g = torch.randn(n_tokens, d, dtype=dtype), torch.randn(n_tokens, len(weight), dtype=dtype)
    ids = torch.from_numpy(np.asarray(train[:n_tokens], dtype=np.int64)).reshape(cfg["batch_size"], -1)
    timings, clock = [], {"resume": time.process_time()}

    def after_step(optimizer, *_):
        end = time.process_time()
        forward, back = _cpu(lambda: z @ weight.T), _cpu(lambda: g @ weight)
        with torch.no_grad():
            states = _cpu(lambda: model.base_model(input_ids=ids, output_hidden_states=True, use_cache=False))
        timings.append((end - clock["resume"], forward, back, states))
        clock["resume"] = time.process_time()

    handle = register_optimizer_step_post_hook(after_step)
    try:
        train_lens(model, train, **{**recipe(cfg), "steps": args.steps}, seed=0)
    finally:
        handle.remove()
    step, forward, back, states = np.median(np.array(timings[len(timings) // 5 :]), axis=0)  # warm steps only
    bound = (n_blocks + 1) * forward + n_blocks * back
    flops = 2 * n_tokens * d * len(weight)
    peak = gemm_peak()
    print(
        f"{code.name or code}: recipe {recipe({**cfg, 'steps': args.steps})}, {args.threads} thread(s), "
        f"model {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}"
    )
    print(f"  lens step            {step * 1e3:7.1f} ms (median of {len(timings) - len(timings) // 5} steps)")
    print(
        f"  seven-product bound  {bound * 1e3:7.1f} ms ({n_blocks + 1} x {forward * 1e3:.2f} forward + {n_blocks} x "
        f"{back * 1e3:.2f} back, {str(dtype).removeprefix('torch.')}, at {flops / forward / 1e9:.0f} / "
        f"{flops / back / 1e9:.0f} GFLOP/s)"
    )
    print(f"  ratio                {step / bound:7.2f}")
    print(
        f"  model forward        {states * 1e3:7.1f} ms (its states; outside the bound): step / (bound + forward) "
        f"{step / (bound + states):.2f}"
    )
    print(f"  fp32 GEMM peak       {peak:7.1f} GFLOP/s on 1 thread (2048^3, CPU time)")
    if args.record is not None:
        figures = [
            ("lens step", round(step * 1e3, 1), "ms"),
            ("seven-product bound", round(bound * 1e3, 1), "ms"),
            ("step / bound", round(step / bound, 2), ""),
            ("model forward", round(states * 1e3, 1), "ms"),
            ("step / (bound + forward)", round(step / (bound + states), 2), ""),
            ("readout forward product", round(flops / forward / 1e9), "GFLOP/s"),
            ("readout backward product", round(flops / back / 1e9), "GFLOP/s"),
        ]
        setting = f"step, {str(dtype).removeprefix('torch.')} products{'' if args.build else ', synthetic model'}"
        records.append(figures, peak=peak, setting=setting, note=args.record)


def job_benchmark(args):
    """CPU seconds of one lens job (workflow/scripts/lens.py in a subprocess) of this checkout and of --old."""
    codes = [ROOT] + ([args.old.resolve()] if args.old else [])
    seconds = {code: [] for code in codes}
    model = args.build / "results" / "checkpoints" / RUN / f"step{_last_step(args.build)}"
    tokens = args.build / "results" / "tokens"
    for _ in range(args.repeats):
        for code in codes:
            with tempfile.TemporaryDirectory() as out:
                spec = {
                    "code": str(code),
                    "model": str(model),
                    "tokens": str(tokens),
                    "out": out,
                    "threads": args.threads,
                }
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                wall = time.perf_counter()
                subprocess.run(
                    [sys.executable, __file__, "--run-job", json.dumps(spec)],
                    check=True,
                    env={**os.environ, "PYTHONPATH": str(code / "src")},
                )
                wall = time.perf_counter() - wall
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
                seconds[code].append(cpu)
                print(f"{code}: lens job {cpu:.1f} s CPU, {wall:.1f} s wall", flush=True)
    import numpy as np

    peak = gemm_peak()
    print(f"fp32 GEMM peak {peak:.1f} GFLOP/s on 1 thread (2048^3, CPU time)")
    for code in codes:
        print(f"{code}: median {np.median(seconds[code]):.1f} s CPU per lens job ({seconds[code]})")
    figures = [("lens job, this checkout", round(np.median(seconds[ROOT]), 1), "s CPU")]
    if args.old:
        ratio = np.median(seconds[ROOT]) / np.median(seconds[codes[1]])
        print(f"new / old: {ratio:.2f}")
        old = (
            subprocess.run(
                ["git", "-C", str(args.old), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
            ).stdout.strip()
            or args.old.name
        )
        figures += [
            (f"lens job, {old}", round(np.median(seconds[codes[1]]), 1), "s CPU"),
            (f"this / {old}", round(ratio, 2), ""),
        ]
    if args.record is not None:
        records.append(figures, peak=peak, setting="lens job", note=args.record)


def run_job(spec):
    """Run `code`'s workflow/scripts/lens.py on one model, as snakemake's script directive would."""
    import runpy
    from types import SimpleNamespace

    import yaml

    code, out, tokens = Path(spec["code"]), Path(spec["out"]), Path(spec["tokens"])
    cfg = yaml.safe_load((code / "config.yaml").read_text())["lens"]
    cfg = {"dtype": "float32", "device": "cpu", "threads": 1, **cfg}
    files = {
        "model": spec["model"],
        "train": str(tokens / "train.json"),
        "val": str(tokens / "val.json"),
        "meta": str(tokens / "meta.json"),
    }
    outputs = {
        "metric": str(out / "lens.parquet"),
        "weights": str(out / "lens.safetensors"),
        "windows": str(out / "windows.parquet"),
    }
    snakemake = SimpleNamespace(
        input=_Named(files),
        output=_Named(outputs),
        log=[str(out / "lens.log")],
        threads=spec["threads"],
        params=SimpleNamespace(lens=cfg, ids={"pair": "main", "role": "tied", "model": "olmo_tied", "seed": 0}),
    )
    runpy.run_path(str(code / "workflow" / "scripts" / "lens.py"), init_globals={"snakemake": snakemake})


class _Named(dict):
    """snakemake's named input/output lists: items by key and by attribute."""

    def __getattr__(self, key):
        return self[key]

    def __getitem__(self, key):
        return super().__getitem__(key) if isinstance(key, str) else list(self.values())[key]


def _last_step(build):
    import yaml

    return yaml.safe_load((build / "config.yaml").read_text())["train"]["steps"]


def _cpu(fn):
    start = time.process_time()
    fn()
    return time.process_time() - start


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", type=Path, help="a build directory: time the step on its olmo/tied/seed0 model")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--threads", type=int, default=1, help="the lens rule's default")
    parser.add_argument("--src", type=Path, help="time this checkout's code and recipe instead")
    parser.add_argument("--job", type=Path, metavar="BUILD", help="CPU seconds of a lens job on BUILD's model")
    parser.add_argument("--old", type=Path, help="with --job: also the lens job of this checkout")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--run-job", help=argparse.SUPPRESS)
    records.add_flag(parser)
    args = parser.parse_args()
    if args.run_job:
        return run_job(json.loads(args.run_job))
    if args.job:
        args.build = args.job.resolve()
        return job_benchmark(args)
    if args.src and Path(os.environ.get("PYTHONPATH", "")).resolve() != (args.src / "src").resolve():
        env = {**os.environ, "PYTHONPATH": str((args.src / "src").resolve())}
        return subprocess.run([sys.executable, *sys.argv], env=env, check=True)
    step_benchmark(args, (args.src or ROOT).resolve())


if __name__ == "__main__":
    main()

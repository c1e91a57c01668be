"""Job-seconds of a scaling grid on this machine (issue 21): each cell's estimated cost and the total.
Prints figures; asserts nothing.

    .venv/bin/python benchmarks/grid_cost.py [--config configs/scaling.yaml] [--steps 6] [--threads 1]
        [--record [NOTE]]

Measured here, in process CPU seconds (the cores may be shared; CPU time is what a job costs):
- start-up: `python -c "import torch, transformers"`, and a training job's fixed cost in a fresh
  interpreter (imports, tokenizer load, model build, one checkpoint: evaluation, export, state save);
- per cell shape: one training step (tying.train.loop's step with the gradient tap, train_bench.Stepper) of
  the tied and the untied model, one checkpoint (train_bench.checkpoint_cost), one tuned-lens step
  (tying.lens.fitting.train_lens) of a freshly initialised model.
Estimated from those: a run = start-up + steps x step + checkpoints x checkpoint (the untied run at its
own step cost, each scaled variant at the tied one's); a lens job = start-up + lens.steps x lens step
(its evaluation left out); a C3 cell's lens work = 2 x seeds lens jobs + 2 half-budget convergence
lenses (the first seed's check, as the claims pair gets it today). Metric jobs are counted at the
default build's measured mean, 2.7 s each (benchmarks/records.csv: build_bench at f9aa496, 157
metric job-seconds over 59 jobs), 7 a seed (the claims metrics and the token set) and one claims table
a cell; the data jobs (corpus, tokenizer, tokens) are
not estimated here (the docstrings corpus read alone took about 4 minutes, docs/pipeline.md).
"""

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import records
import torch
import train_bench
import transformers

from tying.data.tokenizer import save, train_bpe
from tying.lens.fitting import train_lens
from tying.plan.claims import CLAIMS_METRICS
from tying.plan.grid import cells
from tying.plan.layers import load
from tying.plan.run_spec import RunSpec
from tying.train.models import build_model, init_seed, run_config

METRIC_JOB_S = 2.7  # the default build's metric jobs, mean seconds (benchmarks/records.csv, build_bench)
METRIC_JOBS_PER_SEED = len(CLAIMS_METRICS) + 1  # + the pair's token set
TRAIN_CORPUS_TOKENS = 10_549_560  # docs/pipeline.md: the docstrings corpus's training split at vocabulary 4096

STARTUP_SCRIPT = """
import json, sys, time
from pathlib import Path
t = [time.process_time()]
import torch, transformers
torch.set_num_threads(1)  # as a training job with train.threads 1
from tying.plan.run_spec import RunSpec
from tying.train.loop import build, eval_batches, save_checkpoint
t.append(time.process_time())
transformers.utils.logging.disable_progress_bar()
tokenizer = transformers.AutoTokenizer.from_pretrained(sys.argv[1])
t.append(time.process_time())
spec = RunSpec.from_dict(json.loads(sys.argv[2]))
model, tap, opt, sched = build(spec, "cpu")
tokens = torch.randint(0, spec.vocab_size, (100_000,)).numpy()
val = eval_batches(tokens, spec.eval_batches, spec.batch_size, spec.seq_len)
t.append(time.process_time())
save_checkpoint(spec, model, opt, sched, tokenizer, val, "cpu", 0, [], [], Path(sys.argv[3]) / "state.pt",
            Path(sys.argv[3]) / "exports")
t.append(time.process_time())
print(json.dumps(dict(zip(["imports", "tokenizer", "build", "checkpoint"], [b - a for a, b in zip(t, t[1:])]))))
"""


def child_cpu(cmd, repeats=3):
    """Median (CPU seconds of the child process, its stdout) over `repeats` runs of `cmd`."""
    results = []
    for _ in range(repeats):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode:
            raise SystemExit(f"{cmd[:2]} failed:\n{done.stderr[-2000:]}")
        out = done.stdout
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        results.append((after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, out))
    results.sort(key=lambda r: r[0])
    return results[len(results) // 2]


def spec_for(cell, config, tied, steps):
    train = config["train"]
    return RunSpec(
        family="olmo",
        vocab_size=cell.vocab_size,
        eos_id=0,
        hidden_size=cell.hidden_size,
        layers=cell.layers,
        heads=cell.heads,
        intermediate_size=cell.intermediate_size,
        seq_len=cell.seq_len,
        tied=tied,
        input_grad_scale=1.0,
        seed=0,
        steps=steps,
        batch_size=cell.batch_size,
        lr=train["lr"],
        warmup=train["warmup"],
        min_lr_ratio=0.1,
        weight_decay=0.1,
        grad_clip=1.0,
        checkpoints=cell.checkpoints,
        eval_batches=train.get("eval_batches", 8),
    )


def step_cost(spec, ids, steps):
    """Median CPU seconds of one training step (gradient tap on, as tying.train.loop runs)."""
    run = train_bench.Stepper(spec, ids, True)
    run(), run()
    times = []
    for _ in range(steps):
        cpu = time.process_time()
        run()
        times.append(time.process_time() - cpu)
    return statistics.median(times)


def lens_step_cost(spec, ids, lens_cfg, steps):
    """CPU seconds per tuned-lens step on a freshly initialised, frozen model of `spec`'s shape."""
    model = build_model(run_config(spec), init_seed(0, True)).eval().requires_grad_(False)
    kwargs = dict(
        seq_len=lens_cfg["seq_len"],
        batch_size=lens_cfg["batch_size"],
        lr=lens_cfg["lr"],
        optimizer=lens_cfg.get("optimizer", "adam"),
    )
    train_lens(model, ids, steps=1, **kwargs)  # warm-up
    cpu = time.process_time()
    train_lens(model, ids, steps=steps, **kwargs)
    return (time.process_time() - cpu) / steps


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/scaling.yaml")
    parser.add_argument("--steps", type=int, default=6, help="timed training and lens steps per shape")
    parser.add_argument("--threads", type=int, default=1)
    records.add_flag(parser)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    transformers.utils.logging.disable_progress_bar()
    config = load(args.config)
    grid = cells(config)
    lens_cfg = config["lens"]
    ids = np.random.default_rng(0).integers(0, config["tokenizer"]["vocab_size"], 500_000).astype(np.int32)

    bare, _ = child_cpu([sys.executable, "-c", "pass"])
    imports, _ = child_cpu([sys.executable, "-c", "import torch, transformers"])
    with tempfile.TemporaryDirectory() as tmp:
        text = [Path(p).read_text(errors="ignore") for p in sorted(Path(torch.__file__).parent.rglob("*.py"))[:400]]
        save(train_bpe(text, config["tokenizer"]["vocab_size"]), Path(tmp) / "tokenizer")
        default = next(
            (
                c
                for c in grid
                if (c.hidden_size, c.layers) == (config["model"]["hidden_size"], config["model"]["layers"])
            ),
            grid[0],
        )
        fields = spec_for(default, config, True, default.steps).to_dict()
        job, out = child_cpu(
            [sys.executable, "-c", STARTUP_SCRIPT, str(Path(tmp) / "tokenizer"), json.dumps(fields), tmp]
        )
    phases = json.loads(out.strip().splitlines()[-1])
    print(
        f"start-up (CPU s): interpreter {bare:.2f}; python -c 'import torch, transformers' {imports:.2f}; "
        f"training job's fixed cost {job:.2f} at {default.name}'s shape (in process: "
        + ", ".join(f"{k} {v:.2f}" for k, v in phases.items())
        + ")"
    )

    shapes = {}
    for cell in grid:
        key = (cell.hidden_size, cell.layers, cell.heads, cell.intermediate_size)
        if key not in shapes:
            tied, untied = spec_for(cell, config, True, 300), spec_for(cell, config, False, 300)
            shapes[key] = {
                "tied": step_cost(tied, ids, args.steps),
                "untied": step_cost(untied, ids, args.steps),
                "checkpoint": train_bench.checkpoint_cost(tied, ids, repeats=2),
                "lens": lens_step_cost(tied, ids, lens_cfg, args.steps),
                "gflops": train_bench.flops_per_token(tied) * cell.batch_size * cell.seq_len / 1e9,
            }
    windows = TRAIN_CORPUS_TOKENS // config["model"]["seq_len"]
    header = (
        f"{'cell':>15} {'params':>9} {'emb':>5} {'tokens':>10} {'passes':>6} {'step s':>7} {'GFLOP/s':>7} "
        f"{'ckpt s':>6} {'lens st':>7} {'runs':>4} {'train s':>8} {'lens s':>7} {'metric s':>8} {'cell s':>8}"
    )
    print(header)
    totals = {"train": 0.0, "lens": 0.0, "metrics": 0.0}
    longest, by_cell = 0.0, {}
    for cell in grid:
        s = shapes[(cell.hidden_size, cell.layers, cell.heads, cell.intermediate_size)]
        n_seeds, n_scaled = len(cell.seeds), len(cell.scaled)
        run = lambda per_step: job + cell.steps * per_step + (len(cell.checkpoints) - 1) * s["checkpoint"]  # noqa: E731
        train = n_seeds * ((1 + n_scaled) * run(s["tied"]) + run(s["untied"]))
        lens_job = job + lens_cfg["steps"] * s["lens"]
        lens = (2 * n_seeds * lens_job + 2 * (job + lens_cfg["steps"] / 2 * s["lens"])) if cell.lens else 0.0
        metrics = METRIC_JOB_S * (METRIC_JOBS_PER_SEED * n_seeds + 1)
        longest = max(longest, run(max(s["tied"], s["untied"])) + (lens_job if cell.lens else 0))
        for key, value in (("train", train), ("lens", lens), ("metrics", metrics)):
            totals[key] += value
        by_cell[cell.name] = train + lens + metrics
        print(
            f"{cell.name:>15} {sum(cell.params()):>9,} {cell.embedding_share():>5.0%} {cell.tokens:>10,} "
            f"{cell.steps * cell.batch_size / windows:>6.3f} {s['tied']:>7.3f} {s['gflops'] / s['tied']:>7.1f} "
            f"{s['checkpoint']:>6.2f} {s['lens']:>7.3f} {n_seeds * (2 + n_scaled):>4} {train:>8.0f} {lens:>7.0f} "
            f"{metrics:>8.0f} {by_cell[cell.name]:>8.0f}"
        )
    total = sum(totals.values())
    print(
        f"total: {total:,.0f} job-seconds (train {totals['train']:,.0f}, lens {totals['lens']:,.0f}, metrics "
        f"{totals['metrics']:,.0f}; data jobs not included) = {total / 120:.1f} min at 2 parallel jobs if perfectly "
        f"packed; longest single chain (one run, then its lens) {longest:,.0f} s"
    )
    cheapest = min(grid, key=lambda c: run_cost(c, shapes, job))
    print(
        f"the training job's fixed cost ({job:.1f} s) is {job / run_cost(cheapest, shapes, job):.0%} of the grid's "
        f"cheapest run ({cheapest.name}, tied: {run_cost(cheapest, shapes, job):.1f} s)"
    )
    if args.record is not None:
        figures = [("estimated job-seconds", round(total), "s")]
        figures += [(f"estimated {key} job-seconds", round(value), "s") for key, value in totals.items()]
        figures += [(f"estimated {name} job-seconds", round(value), "s") for name, value in by_cell.items()]
        figures += [("training job's fixed cost", round(job, 2), "s CPU")]
        records.append(figures, peak=train_bench.gemm_peak(1)[1], setting=args.config, note=args.record)


def run_cost(cell, shapes, job):
    """Job-seconds of the cell's tied run: fixed cost, steps, the checkpoints after step 0."""
    s = shapes[(cell.hidden_size, cell.layers, cell.heads, cell.intermediate_size)]
    return job + cell.steps * s["tied"] + (len(cell.checkpoints) - 1) * s["checkpoint"]


if __name__ == "__main__":
    main()

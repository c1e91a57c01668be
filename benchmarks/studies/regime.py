"""What a training regime buys: one run's validation loss at a few steps beside the count tables of the tokens
it drew by then, and what the run cost. Prints figures; asserts nothing.

    .venv/bin/python benchmarks/studies/regime.py TOKENS [--config config.yaml ...] [--arch olmo] [--variant tied]
        [--seed 0] [--set train.steps=1000 --set model.layers=6 ...] [--marks 5] [--threads 1] [--record [NOTE]]

TOKENS: a build's results/tokens folder (train.json, val.json, meta.json); for another vocabulary or corpus,
build one in its own directory first, e.g.
`.venv/bin/snakemake --cores 2 results/tokens/meta.json -d /tmp/v2048 --config "tokenizer={vocab_size: 2048}"`.
The run is the training rule's (tying.train.loop's batches, model, optimizer, schedule and gradient tap) for one seed
under the config (config.yaml, then each --config overlay, then each --set SECTION.KEY=VALUE), without
exporting checkpoints. At `--marks` evenly spaced steps it prints the validation loss on the training rule's
validation batches, the unigram and bigram tables' (tying.metrics.baselines) and the margin, with the training CPU
seconds so far; with --record, the last mark's figures go to benchmarks/records.csv.
"""

import argparse
import json
import sys
import time
from pathlib import Path

import torch
import yaml

from tying.data.batches import eval_batches, train_batch
from tying.data.tokens import load_ids
from tying.metrics.baselines import count_baselines
from tying.plan.config import prepared
from tying.plan.run_params import run_params
from tying.plan.run_spec import RunSpec
from tying.runtime import configure
from tying.train.loop import build, evaluate

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))  # records.py and train_bench's GEMM peak

import records  # noqa: E402
from train_bench import gemm_peak  # noqa: E402


def settings_overlay(settings):
    """{section: {key: value}} of each SECTION.KEY=VALUE of `settings` (VALUE read as YAML): an overlay, as --config
    is."""
    overlay = {}
    for setting in settings:
        key, _, value = setting.partition("=")
        section, _, name = key.partition(".")
        overlay.setdefault(section, {})[name] = yaml.safe_load(value)
    return overlay


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tokens", type=Path)
    parser.add_argument("--config", nargs="*", default=[], help="overlays over config.yaml, in order")
    parser.add_argument("--arch", default="olmo")
    parser.add_argument("--variant", default="tied")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", nargs="*", default=[], dest="settings", metavar="SECTION.KEY=VALUE")
    parser.add_argument("--marks", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    records.add_flag(parser)
    args = parser.parse_args()
    configure(args.threads)
    config = prepared(*args.config, overrides=settings_overlay(args.settings)).config
    meta = json.loads((args.tokens / "meta.json").read_text())
    train, val = (load_ids(args.tokens / f"{split}.json", args.tokens / "meta.json") for split in ("train", "val"))
    spec = RunSpec.from_dict(
        {
            **run_params(config, args.arch, args.variant),
            "seed": args.seed,
            "vocab_size": meta["vocab_size"],
            "eos_id": meta["eos_id"],
        }
    )
    marks = sorted({round(spec.steps * (i + 1) / args.marks) for i in range(args.marks)})
    tables = count_baselines(
        train, val, spec.vocab_size, (0, spec.steps, spec.batch_size, spec.seq_len), spec.eval_batches, marks
    ).set_index("step")
    model, tap, opt, sched = build(spec, "cpu")
    batches = eval_batches(val, spec.eval_batches, spec.batch_size, spec.seq_len)
    print(
        f"{spec.family} d={spec.hidden_size} layers={spec.layers} V={spec.vocab_size} {args.variant}, "
        f"{spec.steps} steps of {spec.batch_size}x{spec.seq_len}, lr {spec.lr}, warmup {spec.warmup}; "
        f"{len(train):,} training tokens ({spec.steps * spec.batch_size * spec.seq_len / len(train):.2f} passes)"
    )
    print(f"{'step':>6} {'val loss':>9} {'bigram':>7} {'margin':>7} {'unigram':>8} {'CPU s':>7} {'tok/CPU s':>10}")
    cpu = 0.0
    for step in range(1, spec.steps + 1):
        start = time.process_time()
        x, y = train_batch(train, step, spec.seed, spec.batch_size, spec.seq_len)
        tap.reset()
        with torch.autocast("cpu", torch.bfloat16, enabled=spec.dtype == "bfloat16"):
            loss = tap(input_ids=x, targets=y)
        loss.backward()
        tap.norms()
        torch.nn.utils.clip_grad_norm_(model.parameters(), spec.grad_clip)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        cpu += time.process_time() - start
        if step in marks:
            val_loss, row = evaluate(model, batches, "cpu"), tables.loc[step]
            print(
                f"{step:>6} {val_loss:>9.3f} {row.bigram_loss:>7.3f} {val_loss - row.bigram_loss:>+7.3f} "
                f"{row.unigram_loss:>8.3f} {cpu:>7.1f} {step * spec.batch_size * spec.seq_len / cpu:>10,.0f}"
            )
    if args.record is not None:
        figures = [
            ("val loss", round(val_loss, 3), "nats"),
            ("bigram table", round(row.bigram_loss, 3), "nats"),
            ("margin", round(val_loss - row.bigram_loss, 3), "nats"),
            ("training CPU", round(cpu), "s"),
            ("tokens per CPU second", round(spec.steps * spec.batch_size * spec.seq_len / cpu), "tokens/s"),
        ]
        setting = (
            f"{spec.family} {args.variant} d={spec.hidden_size} layers={spec.layers} V={spec.vocab_size}, "
            f"{spec.steps} steps, lr {spec.lr}, warmup {spec.warmup}, seed {spec.seed}"
        )
        records.append(figures, peak=gemm_peak(1)[1], setting=setting, note=args.record)


if __name__ == "__main__":
    main()

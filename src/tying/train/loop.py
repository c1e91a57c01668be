"""The training loop: one (architecture, variant, seed) run, resumable and exported as checkpoints.

Read top to bottom: build model, optimizer, schedule; resume if a matching state exists; loop
(batch, forward, backward, provenance, clip, step); at each checkpoint step evaluate, export and
save the full state; at the end move the exports into place and write the logs.
"""

import json
import math
import shutil
import sys
import time
from contextlib import nullcontext
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import torch
import transformers

from tying.checkpoints.checkpoint_files import weight_digests
from tying.data.batches import eval_batches, train_batch
from tying.data.tokenizer import load as load_tokenizer
from tying.data.tokens import load_ids
from tying.io import atomic_path
from tying.plan.recipes import init_scheme
from tying.plan.run_spec import lr_lambda
from tying.train.cross_entropy import NextTokenLoss
from tying.train.grad_provenance import GradientTap
from tying.train.models import build_model, init_seed, run_config
from tying.train.ranks import LOCAL


@torch.no_grad()
def evaluate(model, batches, device):
    """Mean validation loss (nats per token) over fixed batches."""
    model.eval()
    loss = NextTokenLoss(model)
    total = sum(loss(input_ids=x.to(device), targets=y.to(device)).item() * y.numel() for x, y in batches)
    model.train()
    return total / sum(y.numel() for _, y in batches)


def build(spec, device):
    """Model, gradient tap, optimizer and schedule for `spec` at step 0."""
    model = build_model(
        run_config(spec), init_seed(spec.seed, spec.tied, spec.init_offset), init_scheme(spec.family, spec.init)
    ).to(device)
    model.train()
    tap = GradientTap(model, spec.input_grad_scale)
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": spec.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=spec.lr,
        betas=(0.9, 0.95),
        eps=spec.adam_eps,
        fused=True,
    )  # one kernel per tensor: a quarter of the foreach update's CPU time
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(spec))
    return model, tap, opt, sched


def export(model, tokenizer, directory, meta):
    """Write a save_pretrained checkpoint (config, safetensors, tokenizer, training.json with the weights' digests)."""
    with atomic_path(directory) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (Path(tmp) / "training.json").write_text(json.dumps({**meta, "weights": weight_digests(tmp)}, indent=1))


class Progress:
    """One line every `every` steps: step, loss, tokens/s and ETA."""

    def __init__(self, name, spec, every, start_step):
        self.name, self.spec, self.every = name, spec, every
        self.t0, self.step0 = time.perf_counter(), start_step

    def __call__(self, step, loss):
        if step % self.every and step != self.spec.steps:
            return
        elapsed = time.perf_counter() - self.t0
        done = step - self.step0
        rate = done * self.spec.batch_size * self.spec.seq_len / max(elapsed, 1e-9)
        eta = elapsed / max(done, 1) * (self.spec.steps - step)
        print(
            f"[{self.name}] step {step}/{self.spec.steps} loss {loss:.4f} | {rate:,.0f} tok/s | "
            f"ETA {time.strftime('%H:%M:%S', time.gmtime(eta))}",
            file=sys.stderr,
            flush=True,
        )


def train(
    spec,
    train_ids,
    val_ids,
    tokenizer,
    work_dir,
    *,
    checkpoint_dirs,
    log_path,
    provenance_path,
    device="cpu",
    name="run",
    log_every=50,
    until=None,
    group=LOCAL,
):
    """Train `spec`, resuming from `work_dir` when a state with the same fingerprint is there.

    Every step in spec.checkpoints is exported to checkpoint_dirs[step]; the per-step log
    (loss, lr, validation loss at checkpoints) goes to `log_path` and the gradient provenance
    (input- and output-path norms; for tied runs the exact split of the shared gradient) to
    `provenance_path`. With `until`, stop after that step leaving the resumable state
    (as a killed job would) and write no outputs. Under a `tying.train.ranks.Ranks` group each
    rank trains on its slice of every batch and rank 0 alone evaluates and writes.
    """
    transformers.utils.logging.disable_progress_bar()
    work_dir = Path(work_dir)
    state_path, staging = work_dir / "state.pt", work_dir / "exports"
    model, tap, opt, sched = build(spec, device)
    forward = group.wrap(tap)
    val = eval_batches(val_ids, spec.eval_batches, spec.batch_size, spec.seq_len)
    log, provenance, start = [], [], 0
    if state_path.exists():
        state = torch.load(state_path, map_location=device, weights_only=False)
        if state["fingerprint"] == spec.fingerprint() and state["step"] > 0:  # a step-0 state: start afresh
            model.load_state_dict(state["model"])
            opt.load_state_dict(state["optimizer"])
            sched.load_state_dict(state["scheduler"])
            torch.set_rng_state(state["rng"])
            log, provenance, start = state["log"], state["provenance"], state["step"]
            print(f"[{name}] resuming from step {start}", file=sys.stderr, flush=True)
    group.barrier()  # every rank has read the state before rank 0 may replace it
    if start == 0 and group.is_main:
        shutil.rmtree(work_dir, ignore_errors=True)
        save_checkpoint(spec, model, opt, sched, tokenizer, val, device, 0, log, provenance, state_path, staging)

    progress = Progress(name, spec, log_every, start)
    for step in range(start + 1, (spec.steps if until is None else until) + 1):
        batch = train_batch(train_ids, step, spec.seed + spec.data_offset, spec.batch_size, spec.seq_len)
        x, y = group.shard(batch)
        tap.reset()
        loss = 0.0
        for i, (xm, ym) in enumerate(zip(x.chunk(spec.grad_accum), y.chunk(spec.grad_accum))):
            with group.accumulating(forward) if i < spec.grad_accum - 1 else nullcontext():
                with torch.autocast(torch.device(device).type, torch.bfloat16, enabled=spec.dtype == "bfloat16"):
                    micro = forward(input_ids=xm.to(device), targets=ym.to(device)) / spec.grad_accum
                micro.backward()
            loss = loss + micro.detach()
        loss = group.average(loss, tap)
        provenance.append({"step": step, "loss": loss.item(), **tap.norms(), "input_grad_scale": spec.input_grad_scale})
        torch.nn.utils.clip_grad_norm_(model.parameters(), spec.grad_clip)
        log.append({"step": step, "lr": sched.get_last_lr()[0], "loss": loss.item(), "val_loss": math.nan})
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        if group.is_main:
            progress(step, loss.item())
        if step in spec.checkpoints and group.is_main:
            save_checkpoint(spec, model, opt, sched, tokenizer, val, device, step, log, provenance, state_path, staging)
    if until is not None and until < spec.steps or not group.is_main:
        return

    for step in spec.checkpoints:
        with atomic_path(checkpoint_dirs[step]) as tmp:
            shutil.copytree(staging / f"step{step}", tmp)
    write_rows(log, log_path)
    write_rows(provenance, provenance_path)
    shutil.rmtree(work_dir, ignore_errors=True)


def write_rows(rows, path):
    """Write dicts with the same keys as one Parquet table, a column per key, atomically. Through pyarrow
    alone, as pandas.DataFrame.to_parquet would write them: a training job does not import pandas (half
    a second of its start-up)."""
    with atomic_path(path) as tmp:
        pq.write_table(pa.Table.from_pylist(rows), tmp)


def train_from_files(spec, files, work_dir, **outputs):
    """`train` on the training rule's inputs: `files` maps train and val (token arrays), meta (their
    sidecar) and tokenizer (a directory) to paths; `outputs` are train's keywords."""
    train(
        spec,
        load_ids(files["train"], files["meta"]),
        load_ids(files["val"], files["meta"]),
        load_tokenizer(files["tokenizer"]),
        work_dir,
        **outputs,
    )


def save_checkpoint(spec, model, opt, sched, tokenizer, val, device, step, log, provenance, state_path, staging):
    """Evaluate, export the weights of `step` and save the full resumable state."""
    val_loss = evaluate(model, val, device)
    if step == 0:
        log.append({"step": 0, "lr": 0.0, "loss": math.nan, "val_loss": val_loss})
    else:
        log[-1]["val_loss"] = val_loss
    meta = {**spec.to_dict(), "step": step, "val_loss": val_loss}
    export(model, tokenizer, staging / f"step{step}", meta)
    state = {
        "fingerprint": spec.fingerprint(),
        "step": step,
        "model": model.state_dict(),
        "optimizer": opt.state_dict(),
        "scheduler": sched.state_dict(),
        "rng": torch.get_rng_state(),
        "log": log,
        "provenance": provenance,
    }
    with atomic_path(state_path) as tmp:
        torch.save(state, tmp)

"""Data-parallel training: torchrun processes under DistributedDataParallel, same numbers as one process.

Every rank draws the same global batch of a step and takes its equal slice; DDP averages the
parameter gradients, which for equal slices is the full-batch gradient. The gradient tap runs
inside DDP's forward (so the reducer's hooks fire on the tapped pass), and the path gradients it
records on each rank are averaged too, so g_in_raw, g_in, g_out and the proxy are the
single-process values. Rank 0 alone evaluates and writes checkpoints, state and logs.

`launch` starts the group from the workflow; `python -m tying.distributed ARGS` is the entry
each rank runs. `LOCAL` is the one-process group `tying.train.train` uses by default.
"""
import datetime
import json
import os
import subprocess
import sys
from contextlib import nullcontext

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from tying.errors import PipelineError


class Local:
    """The single-process group: rank 0 of 1, every operation the identity."""
    rank, world, is_main = 0, 1, True

    def wrap(self, tap):
        return tap

    def shard(self, batch):
        return batch

    def average(self, loss, tap):
        return loss

    def accumulating(self, forward):
        return nullcontext()

    def barrier(self):
        pass


LOCAL = Local()


class Ranks:
    """This process's place in an initialised process group."""

    def __init__(self):
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.is_main = self.rank == 0

    def wrap(self, tap):
        """DDP around the tapped forward pass; called like the tap: forward(input_ids=...)."""
        device = tap.model.device
        return DistributedDataParallel(_Tapped(tap), device_ids=[device.index] if device.type == "cuda" else None,
                                       forward_sync_buffers=False)

    def shard(self, batch):
        """This rank's rows of a global (inputs, targets) batch: (B / world, T) each."""
        n = local_batch(len(batch[0]), self.world)
        return tuple(t[self.rank * n:(self.rank + 1) * n] for t in batch)

    def average(self, loss, tap):
        """Full-batch values from this rank's: the loss and the tap's path gradients become their
        means over ranks (in place), the proxy the norm of the whole batch's embedding-output
        gradient. Returns the global loss (0-d tensor)."""
        stats = torch.stack([loss.detach().double(), torch.tensor(tap.proxy_sq, dtype=torch.float64,
                                                                   device=loss.device)])
        works = [dist.all_reduce(t, async_op=True) for t in (stats, tap.g_in_raw, tap.g_out)]
        for work in works:
            work.wait()
        tap.g_in_raw /= self.world
        tap.g_out /= self.world
        # each rank's loss is the mean over 1/world of the tokens: its gradient is world x its share
        tap.proxy_sq = stats[1].item() / self.world ** 2
        return stats[0] / self.world

    def accumulating(self, forward):
        """Skip the gradient all-reduce during the micro-batches before a step's last."""
        return forward.no_sync()

    def barrier(self):
        dist.barrier()


class _Tapped(torch.nn.Module):
    """The tap's forward as a module, so DDP owns the model's parameters and sees the tapped pass."""

    def __init__(self, tap):
        super().__init__()
        self.model = tap.model
        self.tap = tap

    def forward(self, **inputs):
        return self.tap(**inputs)


def local_batch(batch_size, world):
    """Rows per rank; the global batch must split evenly for the ranks' mean to be the batch mean."""
    if batch_size % world:
        raise PipelineError(f"train.batch_size {batch_size} is not a multiple of train.nproc {world}")
    return batch_size // world


def launch(nproc, spec, *, train, val, meta, tokenizer, work_dir, checkpoint_dirs, log_path, provenance_path,
           device="cpu", name="run", log_every=50, threads=1, until=None):
    """Run `tying.train.train` for `spec` in `nproc` processes (torchrun --standalone) and wait.

    Paths as in the training rule (token arrays, their sidecar, tokenizer directory); the ranks'
    output is copied to stderr. `threads` is shared among the ranks (CPU training).
    """
    local_batch(spec.batch_size, nproc)
    args = {"spec": {**vars(spec)}, "train": train, "val": val, "meta": meta, "tokenizer": tokenizer,
            "work_dir": str(work_dir), "checkpoint_dirs": {str(k): str(v) for k, v in checkpoint_dirs.items()},
            "log_path": str(log_path), "provenance_path": str(provenance_path), "device": device, "name": name,
            "log_every": log_every, "threads": max(1, threads // nproc), "until": until}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
           "-m", "tying.distributed", json.dumps(args)]
    env = {**os.environ, "OMP_NUM_THREADS": str(args["threads"])}
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env) as proc:
        for line in proc.stdout:
            sys.stderr.write(line)
    if proc.returncode:
        raise PipelineError(f"{name}: torchrun with {nproc} processes exited with status {proc.returncode}")


def main(argv):
    """One rank: join the group (gloo on CPU, nccl on CUDA), then train with rank 0 writing."""
    from transformers import AutoTokenizer

    from tying.runtime import configure
    from tying.tokens import load_ids
    from tying.train import RunSpec, train  # here, not above: tying.train imports this module

    args = json.loads(argv[0])
    configure(args["threads"])
    device = args["device"]
    if device == "cuda":
        device = f"cuda:{int(os.environ['LOCAL_RANK'])}"
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if device.startswith("cuda") else "gloo", timeout=datetime.timedelta(hours=1))
    try:
        spec = RunSpec(**{**args["spec"], "checkpoints": tuple(args["spec"]["checkpoints"])})
        train(spec, load_ids(args["train"], args["meta"]), load_ids(args["val"], args["meta"]),
              AutoTokenizer.from_pretrained(args["tokenizer"]), args["work_dir"],
              checkpoint_dirs={int(k): v for k, v in args["checkpoint_dirs"].items()},
              log_path=args["log_path"], provenance_path=args["provenance_path"], device=device,
              name=args["name"], log_every=args["log_every"], until=args["until"], group=Ranks())
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1:])

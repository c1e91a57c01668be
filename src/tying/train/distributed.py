"""The data-parallel launcher: one training run in torchrun processes, same numbers as one process.

`launch` starts the group from the workflow; `python -m tying.train.distributed ARGS` is the entry
each rank runs, training under `tying.train.ranks.Ranks` (how the ranks share the work is there).
"""

import datetime
import json
import os
import subprocess
import sys

import torch
import torch.distributed as dist

from tying.errors import PipelineError
from tying.plan.run_spec import RunSpec
from tying.runtime import configure
from tying.train.loop import train_from_files
from tying.train.ranks import Ranks, local_batch


def launch(
    nproc,
    spec,
    files,
    work_dir,
    *,
    checkpoint_dirs,
    log_path,
    provenance_path,
    device="cpu",
    name="run",
    log_every=50,
    threads=1,
    until=None,
):
    """Run `tying.train.loop.train_from_files` for `spec` in `nproc` processes (torchrun --standalone) and wait.

    Arguments as train_from_files takes them; the ranks' output is copied to stderr. `threads`
    is shared among the ranks (CPU training).
    """
    local_batch(spec.batch_size, nproc)
    args = {
        "spec": spec.to_dict(),
        "files": {k: str(v) for k, v in files.items()},
        "work_dir": str(work_dir),
        "checkpoint_dirs": {str(k): str(v) for k, v in checkpoint_dirs.items()},
        "log_path": str(log_path),
        "provenance_path": str(provenance_path),
        "device": device,
        "name": name,
        "log_every": log_every,
        "threads": max(1, threads // nproc),
        "until": until,
    }
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={nproc}",
        "-m",
        "tying.train.distributed",
        json.dumps(args),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": str(args["threads"])}
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env) as proc:
        for line in proc.stdout:
            sys.stderr.write(line)
    if proc.returncode:
        raise PipelineError(f"{name}: torchrun with {nproc} processes exited with status {proc.returncode}")


def main(argv):
    """One rank: join the group (gloo on CPU, nccl on CUDA), then train with rank 0 writing."""
    args = json.loads(argv[0])
    configure(args["threads"])
    device = args["device"]
    if device == "cuda":
        device = f"cuda:{int(os.environ['LOCAL_RANK'])}"
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if device.startswith("cuda") else "gloo", timeout=datetime.timedelta(hours=1))
    try:
        train_from_files(
            RunSpec.from_dict(args["spec"]),
            args["files"],
            args["work_dir"],
            checkpoint_dirs={int(k): v for k, v in args["checkpoint_dirs"].items()},
            log_path=args["log_path"],
            provenance_path=args["provenance_path"],
            device=device,
            name=args["name"],
            log_every=args["log_every"],
            until=args["until"],
            group=Ranks(),
        )
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1:])

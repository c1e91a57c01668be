"""How a training run's ranks cooperate: `LOCAL` for one process, `Ranks` for a torchrun group under DDP.

Every rank draws the same global batch of a step and takes its equal slice; DDP averages the
parameter gradients, which for equal slices is the full-batch gradient. The gradient tap runs
inside DDP's forward (so the reducer's hooks fire on the tapped pass), and the path gradients it
records on each rank are averaged too, so g_in_raw, g_in, g_out and the proxy are the
single-process values. Rank 0 alone evaluates and writes checkpoints, state and logs.
"""

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
        return DistributedDataParallel(
            _Tapped(tap), device_ids=[device.index] if device.type == "cuda" else None, forward_sync_buffers=False
        )

    def shard(self, batch):
        """This rank's rows of a global (inputs, targets) batch: (B / world, T) each."""
        n = local_batch(len(batch[0]), self.world)
        return tuple(t[self.rank * n : (self.rank + 1) * n] for t in batch)

    def average(self, loss, tap):
        """Full-batch values from this rank's: the loss and the tap's path gradients become their
        means over ranks (in place), the proxy the norm of the whole batch's embedding-output
        gradient. Returns the global loss (0-d tensor)."""
        stats = torch.stack(
            [loss.detach().double(), torch.tensor(tap.proxy_sq, dtype=torch.float64, device=loss.device)]
        )
        works = [dist.all_reduce(t, async_op=True) for t in (stats, tap.g_in_raw, tap.g_out)]
        for work in works:
            work.wait()
        tap.g_in_raw /= self.world
        tap.g_out /= self.world
        # each rank's loss is the mean over 1/world of the tokens: its gradient is world x its share
        tap.proxy_sq = stats[1].item() / self.world**2
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

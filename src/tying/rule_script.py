"""The wrapper every workflow script runs in: stderr teed to the rule's log, one-line errors, and the
job's cost as the log's last line (`job_cost`; benchmarks/build_bench.py reads it)."""

import re
import resource
import sys
import time

import psutil

from tying.errors import PipelineError

# The log's last line on success: the job process's wall seconds since it started (its imports
# included), its CPU seconds and those of the children it waited for, and its peak resident memory.
COST_LINE = re.compile(
    r"^job: (?P<seconds>[0-9.]+) s wall, (?P<cpu_seconds>[0-9.]+) s CPU, peak memory (?P<peak_mb>[0-9.]+) MB$"
)


class _Tee:
    def __init__(self, *streams):
        self.streams = streams

    def write(self, text):
        for s in self.streams:
            s.write(text)
            s.flush()

    def flush(self):
        for s in self.streams:
            s.flush()


def job_cost():
    """This process's cost so far: (wall seconds since it started, CPU seconds of it and of the children it
    waited for, user and system, peak resident MB of it or of its largest child). Exact, from the kernel's
    own accounting, where snakemake's `benchmark:` samples the job's processes (every 0.5 s at first, a
    walk of their page tables each time) and misses the CPU after the last sample."""
    me, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    unit = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux
    return (
        time.time() - psutil.Process().create_time(),
        me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime,
        max(me.ru_maxrss, children.ru_maxrss) * unit / 2**20,
    )


def run(snakemake, body):
    """Call body(snakemake) with stderr copied into snakemake.log[0]; a PipelineError exits with its line.
    On success the log ends with the job's cost (COST_LINE)."""
    log = open(snakemake.log[0], "w") if snakemake.log else None
    if log:
        sys.stderr = _Tee(sys.__stderr__, log)
    try:
        body(snakemake)
        seconds, cpu, peak = job_cost()
        print(f"job: {seconds:.2f} s wall, {cpu:.2f} s CPU, peak memory {peak:.0f} MB", file=sys.stderr)
    except PipelineError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(1)
    finally:
        if log:
            sys.stderr = sys.__stderr__
            log.close()

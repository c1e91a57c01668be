"""Where a finished build's time went: job-seconds per stage from its jobs' logs, beside this machine's fp32
GEMM peaks (so the figures scale to another machine) and the build's wall time. Prints figures; asserts nothing.

    .venv/bin/python benchmarks/build_bench.py [--build .] [--wall SECONDS] [--cells] [--record [NOTE]]
        [--setting "default build"]

Reads the last line of every job's log under BUILD/logs (`tying.rule_script.COST_LINE`: its wall seconds,
its CPU seconds and those of the children it waited for, its peak memory; a job that failed or was cut
short has none and is left out). Stages are the logs' first folder (train, lens, metrics, figures, tables;
corpus, tokenizer, tokens and hub are "data"). The wall time is --wall (e.g. from `time snakemake ...`),
else the span from the first job's start to the last job's end, read from the logs' modification times.
Run it on the machine that built, soon after the build, and with the GEMM peak measured when the cores are
as busy as they were during the build. The training floor is the runs' model FLOPs (read from their
checkpoints' training.json) at the single-thread peak: what the training stage would cost with no
start-up, no checkpoints and a core of its own. With --cells (a scaling grid's build), job-seconds per
grid cell and stage too: a job belongs to the cell its path names (tying.plan.grid's d{hidden}_l{layers}_s{steps});
the data jobs and the sweep's table and figure to none.

Budgets are stated for the faster 2-core class at a 1-thread peak of REFERENCE_PEAK GFLOP/s; the normalised
job-seconds (job-seconds x this machine's 1-thread peak / REFERENCE_PEAK) check a build on either class
against them; where other work shared the cores a job's wall seconds include its waits, and its CPU seconds,
normalised the same way, are the reading to check.
"""

import argparse
import json
import os
import re
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import records
from train_bench import flops_per_token, gemm_peak

from tying.rule_script import COST_LINE

STAGES = ("train", "lens", "metrics", "figures", "tables", "data")
REFERENCE_PEAK = 180.0  # GFLOP/s, 1-thread fp32: the faster class's, which the budgets are stated for
DATA = {"corpus", "tokenizer", "tokens", "hub"}
CELL = re.compile(r"^d\d+_l\d+_s\d+$")  # tying.plan.grid.cell_name


def stage_of(path, root):
    """Stage of one job's log from its place under `root`."""
    first = path.relative_to(root).parts[0].removesuffix(".log")
    return "data" if first in DATA else first


def job_table(root):
    """One row per job whose log ends with its cost: stage, job (path under root), seconds (wall),
    cpu_seconds, peak_mb, start and end (epoch)."""
    rows = []
    for path in sorted(root.rglob("*.log")):
        lines = path.read_text(errors="replace").splitlines()
        cost = COST_LINE.match(lines[-1]) if lines else None
        if cost is None:
            continue
        seconds, end = float(cost["seconds"]), path.stat().st_mtime
        rows.append(
            {
                "stage": stage_of(path, root),
                "job": str(path.relative_to(root)),
                "seconds": seconds,
                "cpu_seconds": float(cost["cpu_seconds"]),
                "peak_mb": float(cost["peak_mb"]),
                "start": end - seconds,
                "end": end,
            }
        )
    return pd.DataFrame(rows)


def stage_table(jobs):
    """Jobs, job-seconds, mean seconds per job, CPU seconds and the largest job's peak memory (MB) per stage
    (every stage of STAGES, then any other folder), and the total."""
    table = jobs.groupby("stage").agg(
        jobs=("job", "size"),
        job_seconds=("seconds", "sum"),
        mean_seconds=("seconds", "mean"),
        cpu_seconds=("cpu_seconds", "sum"),
        peak_mb=("peak_mb", "max"),
    )
    table = table.reindex([*STAGES, *sorted(set(table.index) - set(STAGES))], fill_value=0)
    table.loc["total"] = [
        table["jobs"].sum(),
        table["job_seconds"].sum(),
        jobs["seconds"].mean(),
        table["cpu_seconds"].sum(),
        table["peak_mb"].max(),
    ]
    table["jobs"] = table["jobs"].astype(int)
    return table


def cell_table(jobs):
    """Job-seconds per grid cell (rows, grid cells by name, then "(none)") and stage (columns), with each
    cell's job count and total."""
    cell = jobs["job"].map(lambda job: next((p for p in Path(job).parts if CELL.match(p)), "(none)"))
    table = jobs.assign(cell=cell).pivot_table(
        index="cell", columns="stage", values="seconds", aggfunc="sum", fill_value=0.0
    )
    table = table[[s for s in STAGES if s in table.columns] + sorted(set(table.columns) - set(STAGES))]
    table.insert(0, "jobs", cell.value_counts())
    table["total"] = table.drop(columns="jobs").sum(axis=1)
    table.loc["total"] = table.sum()
    table["jobs"] = table["jobs"].astype(int)
    return table


def training_flops(jobs, results):
    """Model FLOPs of the build's training runs (train_bench.flops_per_token x tokens), from each run's last
    exported checkpoint's training.json; runs whose checkpoints are gone are left out."""
    total = 0.0
    for job in jobs.loc[jobs.stage == "train", "job"]:
        run = Path(job).with_suffix("")  # train/{arch}/{variant}/seed{seed}
        exports = sorted((results / "checkpoints" / Path(*run.parts[1:])).glob("step*/training.json"))
        if exports:
            spec = SimpleNamespace(**json.loads(exports[-1].read_text()))  # the run's RunSpec fields
            total += flops_per_token(spec) * spec.steps * spec.batch_size * spec.seq_len
    return total


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", type=Path, default=Path("."), help="the directory the build ran in")
    parser.add_argument("--wall", type=float, help="the build's wall seconds, if measured")
    parser.add_argument("--cells", action="store_true", help="job-seconds per scaling-grid cell as well")
    parser.add_argument("--setting", default="default build", help="what the build was, for --record")
    records.add_flag(parser)
    args = parser.parse_args()
    root = args.build / "logs"
    jobs = job_table(root)
    if jobs.empty:
        raise SystemExit(f"no job log under {root} ends with its cost: run a build first")
    table = stage_table(jobs)
    wall = args.wall or jobs["end"].max() - jobs["start"].min()
    print(table.round(1).to_string())
    if args.cells:
        print("\njob-seconds per grid cell:")
        print(cell_table(jobs).round(0).to_string())
    print(
        f"wall time: {wall:.0f} s ({'given' if args.wall else 'first job start to last job end'}); "
        f"job-seconds / wall = {table.loc['total', 'job_seconds'] / wall:.2f} jobs running on average"
    )
    for stage in ("train", "lens"):
        seconds = jobs.loc[jobs.stage == stage, "seconds"]
        if len(seconds):
            print(f"{stage}: {seconds.mean():.1f} s per job (min {seconds.min():.1f}, max {seconds.max():.1f})")
    (one_wall, one_cpu), (two, _) = gemm_peak(1), gemm_peak(2)
    print(
        f"machine: {os.cpu_count()} CPUs, load average now {os.getloadavg()[0]:.1f}; fp32 GEMM peak "
        f"{one_cpu:.1f} GFLOP/s on 1 thread ({one_wall:.1f} by wall time), {two:.1f} on 2 threads"
    )
    job_seconds = table.loc["total", "job_seconds"]
    print(
        f"normalised: {job_seconds:.0f} job-seconds x {one_cpu:.1f} / {REFERENCE_PEAK:.0f} = "
        f"{job_seconds * one_cpu / REFERENCE_PEAK:.0f} job-seconds at the faster class's peak"
    )
    cpu_seconds = table.loc["total", "cpu_seconds"]
    print(
        f"normalised CPU: {cpu_seconds:.0f} CPU seconds x {one_cpu:.1f} / {REFERENCE_PEAK:.0f} = "
        f"{cpu_seconds * one_cpu / REFERENCE_PEAK:.0f} (the budget's reading where other work shared the cores)"
    )
    flops = training_flops(jobs, args.build / "results")
    floor = flops / (one_cpu * 1e9)
    if flops:
        print(
            f"train floor: the runs' model FLOPs ({flops / 1e12:.1f} TFLOP) at the 1-thread peak take {floor:.0f} s; "
            f"the train jobs' {table.loc['train', 'job_seconds']:.0f} job-seconds are "
            f"{table.loc['train', 'job_seconds'] / floor:.2f}x that (start-up, checkpoints, cores shared)"
        )
    if args.record is not None:
        main_stages = ("train", "lens", "metrics")
        figures = [
            ("jobs", int(table.loc["total", "jobs"]), ""),
            ("wall time", round(wall), "s"),
            ("job-seconds", round(job_seconds), "s"),
            ("job CPU seconds", round(table.loc["total", "cpu_seconds"]), "s"),
            ("normalised job-seconds", round(job_seconds * one_cpu / REFERENCE_PEAK), "s at 180 GFLOP/s"),
            ("normalised CPU seconds", round(cpu_seconds * one_cpu / REFERENCE_PEAK), "s at 180 GFLOP/s"),
            ("jobs running on average", round(job_seconds / wall, 2), ""),
        ]
        figures += [(f"{stage} job-seconds", round(table.loc[stage, "job_seconds"]), "s") for stage in main_stages]
        other = job_seconds - table.loc[list(main_stages), "job_seconds"].sum()
        figures.append(("other job-seconds", round(other), "s"))
        figures += [("train floor", round(floor), "s")] if flops else []
        records.append(figures, peak=one_cpu, setting=args.setting, note=args.record)


if __name__ == "__main__":
    main()

"""Snakemake overhead: the no-op time of an up-to-date target and the DAG-building time of a config.
Prints figures; asserts nothing.

    .venv/bin/python benchmarks/dag_bench.py [--config configs/paper.yaml] [--workdir DIR] [--repeats 3]
        [--record [NOTE]]

No-op: builds tests/micro.yaml in --workdir (a temporary directory unless given; a given one is
reused, so a second run skips the build), then times `snakemake figures/fig1.pdf` and
`snakemake all` with everything up to date, each against a trivial workflow (one rule, no imports:
snakemake's own start-up and plugin discovery, which no workflow can beat) run alternately with it,
so a change of load affects both alike. Goal: at most 1.3x the trivial workflow.
DAG: times `snakemake -n all` for --config (default configs/paper.yaml when it exists, else
config.yaml) in an empty directory, so every job of that config is planned.
"""

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import records
import yaml

ROOT = Path(__file__).resolve().parents[1]


def snakemake(workdir, config, *args, snakefile=ROOT / "Snakefile", whole=False):
    """Run snakemake on `snakefile` in `workdir` with `config` (an overlay on the checkout's config.yaml, or
    with `whole` a config that replaces it); (seconds, completed process)."""
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(snakefile),
        "-d",
        str(workdir),
        *(["--replace-workflow-config"] if whole else []),
        "--configfile",
        str(config),
        "--cores",
        "2",
        *args,
    ]
    t = time.perf_counter()
    result = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.perf_counter() - t
    if result.returncode:
        sys.exit(f"snakemake {' '.join(args)} failed:\n{result.stderr[-3000:]}")
    return seconds, result


def timed(workdir, config, repeats, *args, **kwargs):
    """Median seconds of `repeats` runs, and the last run's output."""
    runs = [snakemake(workdir, config, *args, **kwargs) for _ in range(repeats)]
    return statistics.median(s for s, _ in runs), runs[-1][1]


def no_op(workdir, repeats):
    """Median seconds of the no-op runs and of the trivial workflow's, per target, as records' figures."""
    config = workdir / "config.yaml"
    config.write_text((ROOT / "tests" / "micro.yaml").read_text())
    seconds, _ = snakemake(workdir, config, whole=True)
    print(f"micro build (or check, when already built): {seconds:.1f} s")
    with tempfile.TemporaryDirectory() as tmp:
        trivial = Path(tmp)
        (trivial / "Snakefile").write_text("rule all:\n    input: []\n")
        (trivial / "config.yaml").write_text("{}\n")
        figures = []
        for target in ("figures/fig1.pdf", "all"):
            times, results = {"trivial": [], "no-op": []}, []
            for _ in range(repeats):  # alternately, so both see the same load
                times["trivial"].append(snakemake(trivial, trivial / "config.yaml", snakefile=trivial / "Snakefile")[0])
                seconds, result = snakemake(workdir, config, target, whole=True)
                times["no-op"].append(seconds)
                results.append(result)
            done = all("Nothing to be done" in r.stdout + r.stderr for r in results)
            base, median = statistics.median(times["trivial"]), statistics.median(times["no-op"])
            print(
                f"no-op `snakemake {target}`: {median:.2f} s against {base:.2f} s for a trivial workflow "
                f"= {median / base:.2f}x (medians of {repeats}, alternating; "
                f"{'nothing to be done' if done else 'JOBS RAN: not up to date'}; goal <= 1.3x)"
            )
            name = "fig1" if target == "figures/fig1.pdf" else target
            figures += [
                (f"no-op {target}", round(median, 2), "s"),
                ("trivial workflow" + ("" if name == "fig1" else f", {name}'s runs"), round(base, 2), "s"),
                (f"{name} / trivial", round(median / base, 2), ""),
            ]
    return figures


def dag(config, repeats):
    """Median seconds of `snakemake -n all` for `config`, as a record's figure."""
    with tempfile.TemporaryDirectory() as empty:
        median, result = timed(Path(empty), config, repeats, "-n", "--quiet", "rules", "all")
    seeds = yaml.safe_load(config.read_text())["seeds"]
    jobs = next(int(line.split()[-1]) for line in result.stdout.splitlines() if line.startswith("total"))
    name = config.relative_to(ROOT) if config.is_relative_to(ROOT) else config
    print(f"DAG of {name} ({len(seeds)} seeds, {jobs} jobs): `snakemake -n all` {median:.2f} s (median of {repeats})")
    return [(f"DAG of {name}", round(median, 2), "s")]


def main():
    paper = ROOT / "configs" / "paper.yaml"
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=paper if paper.exists() else ROOT / "config.yaml")
    parser.add_argument("--workdir", type=Path, help="micro build directory to create or reuse")
    parser.add_argument("--repeats", type=int, default=5)
    records.add_flag(parser)
    args = parser.parse_args()
    if args.workdir:
        args.workdir.mkdir(parents=True, exist_ok=True)
        figures = no_op(args.workdir.resolve(), args.repeats)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            figures = no_op(Path(tmp), args.repeats)
    figures += dag(args.config.resolve(), args.repeats)
    if args.record is not None:
        from train_bench import gemm_peak  # imports torch: only when recording

        records.append(figures, peak=gemm_peak(1)[1], note=args.record)


if __name__ == "__main__":
    main()

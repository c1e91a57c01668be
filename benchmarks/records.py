"""Benchmark records: one row of benchmarks/records.csv per measured figure, and the table of the latest
record per figure and machine class that docs/benchmarks.md shows.

    .venv/bin/python benchmarks/records.py --table    # the markdown table, to paste between the page's markers

A figure is identified by (script, setting, figure): `setting` names what was measured when the script can
measure several things (a regime, a dtype, a run), `figure` the quantity. The scripts append their figures
with `--record` (`append`), stamped with today's date, the checkout's commit, the machine class read from
/proc/cpuinfo, the 1-thread fp32 GEMM peak the script measured and the load average.
"""

import argparse
import csv
import datetime
import os
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORDS = ROOT / "benchmarks" / "records.csv"
FIELDS = ("date", "commit", "script", "machine", "peak_gflops", "setting", "figure", "value", "unit", "command", "note")
FASTER = "faster: Intel Xeon AMX/AVX512-BF16"
SLOWER_BF16 = "slower: AMD EPYC with AVX512-BF16"
SLOWER_NO_AVX512 = "slower: AMD EPYC without AVX-512"
CLASSES = (FASTER, SLOWER_BF16, SLOWER_NO_AVX512)  # the table's classes, in its order
SCRIPTS = (
    "train_bench.py",
    "lens_speed.py",
    "lens_recipes.py",
    "tuned_lens_check.py",
    "regime.py",
    "build_bench.py",
    "dag_bench.py",
    "analysis_bench.py",
    "hub_fetch_bench.py",
    "grid_cost.py",
    "ad hoc",
)  # the table's order
TABLE_START, TABLE_END = "<!-- records table: start -->", "<!-- records table: end -->"


def machine_class(cpuinfo):
    """The machine class of a /proc/cpuinfo text: AMX marks the faster Intel Xeon class; an AMD EPYC is the
    slower class, with or without AVX512-BF16. Anything else is "other: " and its model name."""
    fields = dict(line.split(":", 1) for line in cpuinfo.splitlines() if ":" in line)
    fields = {key.strip(): value.strip() for key, value in fields.items()}
    flags = set(fields.get("flags", "").split())
    amd = fields.get("vendor_id") == "AuthenticAMD"
    if "amx_tile" in flags:
        return FASTER
    if amd and "avx512_bf16" in flags:
        return SLOWER_BF16
    if amd and "avx512f" not in flags:
        return SLOWER_NO_AVX512
    return f"other: {fields.get('model name', 'unknown')}"


def checkout_commit():
    """Short hash of HEAD, with "+" when tracked files other than the records differ from it."""
    git = ["git", "-C", str(ROOT)]
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True)
    dirty = subprocess.run(
        [*git, "status", "--porcelain", "--untracked-files=no", "--", ".", f":!{RECORDS.relative_to(ROOT)}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return head.stdout.strip() + ("+" if dirty.stdout.strip() else "")


def add_flag(parser):
    """The scripts' --record [NOTE] option: append the figures to benchmarks/records.csv, with NOTE."""
    parser.add_argument(
        "--record",
        nargs="?",
        const="",
        metavar="NOTE",
        help="append the figures to benchmarks/records.csv, with an optional note",
    )


def append(
    figures, *, peak, setting="", note="", script=None, command=None, path=RECORDS, date=None, commit=None, machine=None
):
    """Append one row per (figure, value, unit) of `figures` to `path` (its header first if it is new), each
    with `peak` (GFLOP/s, 1-thread fp32, measured by the script; None where it measures none) and `note` plus
    the load average. Script, command, date, commit and machine class default to the running script's name
    and command line, today's date, the checkout's commit and this machine's class."""
    script = script or Path(sys.argv[0]).name
    command = command or ".venv/bin/python " + shlex.join(sys.argv)
    date = date or datetime.date.today().isoformat()
    commit = commit or checkout_commit()
    machine = machine or machine_class(Path("/proc/cpuinfo").read_text())
    note = "; ".join(filter(None, [note, f"load average {os.getloadavg()[0]:.1f}"]))
    new = not path.exists() or path.stat().st_size == 0
    with path.open("a", newline="") as f:
        writer = csv.DictWriter(f, FIELDS, lineterminator="\n")
        if new:
            writer.writeheader()
        for figure, value, unit in figures:
            writer.writerow(
                {
                    "date": date,
                    "commit": commit,
                    "script": script,
                    "machine": machine,
                    "peak_gflops": f"{peak:.1f}" if peak else "",
                    "setting": setting,
                    "figure": figure,
                    "value": str(value),
                    "unit": unit,
                    "command": command,
                    "note": note,
                }
            )


def read(path=RECORDS):
    """The records, in file order."""
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def latest(rows):
    """The latest row per (script, setting, figure, machine class) of the table's classes: the latest date,
    and of one date the last in file order."""
    newest = {}
    for order, row in enumerate(rows):
        if row["machine"] in CLASSES:
            key = (row["script"], row["setting"], row["figure"], row["machine"])
            if key not in newest or row["date"] >= newest[key][1]["date"]:
                newest[key] = (order, row)
    return [row for _, row in sorted(newest.values(), key=lambda kv: kv[0])]


def table(rows):
    """Markdown table of the latest records, one line per script, setting, class and commit (a run), its
    figures joined in file order."""
    runs = {}
    for row in latest(rows):
        key = (row["script"], row["setting"], row["machine"], row["commit"])
        runs.setdefault(key, []).append(row)
    order = sorted(
        runs,
        key=lambda k: (
            SCRIPTS.index(k[0]) if k[0] in SCRIPTS else len(SCRIPTS),
            k[0],
            k[1],
            CLASSES.index(k[2]),
            max(r["date"] for r in runs[k]),
        ),
    )
    lines = ["| script | setting | class | commit | date | peak | figures | note |", "|---" * 8 + "|"]
    for key in order:
        group = runs[key]
        script, setting, machine, commit = key
        peaks = sorted({r["peak_gflops"] for r in group if r["peak_gflops"]})
        notes = list(dict.fromkeys(r["note"] for r in group if r["note"]))
        figures = "; ".join(f"{r['figure']} **{r['value']}**{' ' + r['unit'] if r['unit'] else ''}" for r in group)
        lines.append(
            f"| {script} | {setting or '–'} | {machine} | `{commit}` | {max(r['date'] for r in group)} | "
            f"{', '.join(peaks) or '–'} | {figures} | {'; '.join(notes) or '–'} |"
        )
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", action="store_true", help="print the table of the latest records")
    parser.add_argument("--records", type=Path, default=RECORDS)
    args = parser.parse_args()
    if args.table:
        print(table(read(args.records)), end="")


if __name__ == "__main__":
    main()

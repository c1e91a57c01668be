"""benchmarks/records.csv and docs/benchmarks.md's table of it: the table is the one the records give, every
record is well formed, and the scripts' append path writes rows the table reads."""

import csv
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import records  # noqa: E402

UNRECORDED = "slower: AMD EPYC, AVX-512 not recorded"  # migrated records whose host's flags were not noted


def page_table():
    text = (ROOT / "docs" / "benchmarks.md").read_text()
    start, end = text.index(records.TABLE_START), text.index(records.TABLE_END)
    return text[start + len(records.TABLE_START) : end].strip("\n") + "\n"


def test_the_page_shows_the_table_of_the_records():
    assert page_table() == records.table(records.read()), (
        "docs/benchmarks.md's table differs from the records: paste `.venv/bin/python benchmarks/records.py "
        "--table` between its markers"
    )


def test_the_page_is_at_most_150_lines():
    assert len((ROOT / "docs" / "benchmarks.md").read_text().splitlines()) <= 150


def test_every_record_is_well_formed():
    rows = records.read()
    assert len(rows) > 300
    with records.RECORDS.open() as f:
        assert tuple(next(csv.reader(f))) == records.FIELDS
    for row in rows:
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", row["date"]), row
        assert re.fullmatch(r"[0-9a-f]{7}\+?", row["commit"]), row
        assert row["machine"] in (*records.CLASSES, UNRECORDED), row
        assert re.fullmatch(r"(\d+(\.\d+)?(-\d+(\.\d+)?)?)?", row["peak_gflops"]), row
        float(row["value"])
        assert row["script"] and row["figure"] and row["command"], row
    assert {row["machine"] for row in rows} == {*records.CLASSES, UNRECORDED}


def test_the_table_shows_the_latest_record_of_each_figure_and_class():
    table = records.table(records.read())
    # train_bench on the faster class: ff596ab's 0.45 replaced 4042071's 0.41
    row = next(line for line in table.splitlines() if line.startswith("| train_bench.py") and "Xeon" in line)
    assert "`ff596ab`" in row and "fraction of peak **0.45**" in row and "0.41" not in row
    assert "`4042071` | 2026-12-02 | 184.5 | step CPU" not in table
    # records of an unrecorded class stay in the file only
    assert "not recorded" not in table and any(r["machine"] == UNRECORDED for r in records.read())


def rows(**changes):
    base = {
        "date": "2026-12-01",
        "commit": "aaaaaaa",
        "script": "train_bench.py",
        "machine": records.FASTER,
        "peak_gflops": "200.0",
        "setting": "s",
        "figure": "step CPU",
        "value": "50",
        "unit": "ms",
        "command": "c",
        "note": "",
    }
    return {**base, **changes}


def test_latest_takes_the_later_date_then_the_later_row_and_only_the_three_classes():
    found = records.latest(
        [
            rows(value="1", date="2026-12-02"),
            rows(value="2"),
            rows(value="3", date="2026-12-02"),
            rows(value="4", machine=UNRECORDED),
            rows(value="5", machine=records.SLOWER_BF16),
        ]
    )
    assert [(r["machine"], r["value"]) for r in found] == [(records.FASTER, "3"), (records.SLOWER_BF16, "5")]


def test_append_writes_rows_the_reader_and_the_table_take(tmp_path):
    path = tmp_path / "records.csv"
    stamp = dict(
        path=path,
        date="2026-12-04",
        commit="0962d4c",
        machine=records.SLOWER_BF16,
        script="dag_bench.py",
        command=".venv/bin/python benchmarks/dag_bench.py --record",
    )
    records.append([("no-op all", 2.87, "s"), ("all / trivial", 1.0, "")], peak=88.66, note="busy", **stamp)
    records.append([("bytes read", 8400000, "bytes")], peak=None, setting="hub", **stamp)
    lines = path.read_text().splitlines()
    assert lines[0] == ",".join(records.FIELDS) and len(lines) == 4  # one header
    first, second, third = records.read(path)
    assert (first["date"], first["commit"], first["machine"], first["peak_gflops"]) == (
        "2026-12-04",
        "0962d4c",
        records.SLOWER_BF16,
        "88.7",
    )
    assert (first["figure"], first["value"], first["unit"]) == ("no-op all", "2.87", "s")
    assert second["value"] == "1.0" and third["value"] == "8400000" and third["peak_gflops"] == ""
    assert re.fullmatch(r"busy; load average \d+\.\d", first["note"])
    assert re.fullmatch(r"load average \d+\.\d", third["note"])
    table = records.table(records.read(path))
    assert "| dag_bench.py | – | slower: AMD EPYC with AVX512-BF16 | `0962d4c` | 2026-12-04 | 88.7 |" in table
    assert "no-op all **2.87** s; all / trivial **1.0**" in table


def cpuinfo(vendor, flags):
    return f"vendor_id\t: {vendor}\nmodel name\t: a CPU\nflags\t\t: fpu sse2 {flags}\n\n"


def test_machine_class_from_cpuinfo_flags():
    assert records.machine_class(cpuinfo("GenuineIntel", "avx512f avx512_bf16 amx_tile amx_bf16")) == records.FASTER
    assert records.machine_class(cpuinfo("AuthenticAMD", "avx2 avx512f avx512_bf16")) == records.SLOWER_BF16
    assert records.machine_class(cpuinfo("AuthenticAMD", "avx2 fma")) == records.SLOWER_NO_AVX512
    assert records.machine_class(cpuinfo("GenuineIntel", "avx2 avx512f")) == "other: a CPU"

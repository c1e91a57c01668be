import subprocess
import sys

from tying.rule_script import COST_LINE

JOB = """
import subprocess, sys, time
from types import SimpleNamespace
from tying.errors import PipelineError
from tying.rule_script import run

def spin(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass

def body(snakemake):
    if sys.argv[2] == "fail":
        raise PipelineError("the input is not there")
    spin(0.4)
    subprocess.run([sys.executable, "-c", "import time\\nend = time.process_time() + 0.4\\n"
                    "while time.process_time() < end: pass"], check=True)
    block = bytearray(300 << 20)  # zero pages count once touched
    block[::4096] = b"x" * len(block[::4096])

run(SimpleNamespace(log=[sys.argv[1]]), body)
"""


def job(tmp_path, outcome):
    log = tmp_path / "job.log"
    done = subprocess.run([sys.executable, "-c", JOB, str(log), outcome], capture_output=True, text=True)
    return done, log.read_text().splitlines()


def test_a_job_log_ends_with_its_wall_cpu_and_peak_memory_its_child_included(tmp_path):
    done, lines = job(tmp_path, "ok")
    assert done.returncode == 0, done.stderr
    cost = COST_LINE.match(lines[-1])
    seconds, cpu, peak = (float(cost[k]) for k in ("seconds", "cpu_seconds", "peak_mb"))
    assert 0.8 <= cpu <= seconds + 0.05  # its own 0.4 s and its child's 0.4 s, one after the other
    assert 300 <= peak < 1000
    assert done.stderr.splitlines()[-1] == lines[-1]  # on the console too


def test_a_failed_job_ends_its_log_with_the_error_and_no_cost(tmp_path):
    done, lines = job(tmp_path, "fail")
    assert done.returncode == 1
    assert lines == ["error: the input is not there"]

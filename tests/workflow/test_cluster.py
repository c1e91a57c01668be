"""The slurm profile: what it reads from Slurm (everywhere), and on a real Slurm (tests/cluster/slurm-up's
single-node cluster) the smoke config through profiles/slurm as docs/cluster.md gives it, against a local
run. The real-Slurm tests need root and Debian's Slurm packages, and run only with TYING_SLURM_CHECK=1
(.ci/run sets it after the suite); elsewhere they are skipped."""

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from snakerun import ROOT

from tying.plan.cluster import accounting_off, fewest_cpus

SLURM_UP = ROOT / "tests" / "cluster" / "slurm-up"
SNAKEMAKE = [sys.executable, "-m", "snakemake"]
SMOKE = ["all", "--configfile", "configs/smoke.yaml"]
real_slurm = pytest.mark.skipif(
    os.environ.get("TYING_SLURM_CHECK") != "1", reason="a real Slurm: TYING_SLURM_CHECK=1 as root (.ci/run)"
)


def test_squeue_answers_job_states_only_where_slurm_keeps_no_accounting():
    assert accounting_off("AccountingStorageType   = accounting_storage/none\nMinJobAge = 600 sec\n")
    assert not accounting_off("AccountingStorageType   = accounting_storage/slurmdbd\n")
    assert not accounting_off("")  # no answer: leave the plugin its own choice


def test_a_node_is_as_wide_as_the_smallest_in_the_partition():
    sinfo = "gpu 64+\nmain* 2\nmain* 8\nbig 128\n"
    assert fewest_cpus(sinfo) == 2
    assert fewest_cpus(sinfo, "gpu") == 64 and fewest_cpus(sinfo, "big") == 128
    assert fewest_cpus(sinfo, "absent") is None


def fake_slurm(bin_dir, accounting, sinfo):
    """scontrol and sinfo on a PATH of their own that print `accounting`'s config line and `sinfo`."""
    bin_dir.mkdir()
    for name, text in (("scontrol", f"AccountingStorageType = {accounting}"), ("sinfo", sinfo)):
        (bin_dir / name).write_text(f"#!/bin/sh\nprintf '%s\\n' '{text}'\n")
        (bin_dir / name).chmod(0o755)
    return f"{bin_dir}{os.pathsep}{os.environ['PATH']}"


@pytest.mark.parametrize(
    "accounting,status", [("accounting_storage/none", "squeue"), ("accounting_storage/slurmdbd", None)]
)
def test_the_slurm_profile_alone_sets_what_a_cluster_run_needs(tmp_path, monkeypatch, accounting, status):
    """`--profile profiles/slurm` with the local profile layered over it (no --workflow-profile none): no
    2-core cap, keep going, squeue only without accounting, its short first status check and its groups."""
    from snakemake.cli import parse_args

    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("PATH", fake_slurm(tmp_path / "bin", accounting, "debug 4\nmain* 16"))
    args = parse_args(["-n", "--profile", "profiles/slurm"])[1]
    assert args.cores == 16 and args.keep_going and args.executor == "slurm"
    assert (args.max_jobs_per_timespan.max_jobs, args.max_jobs_per_timespan.timespan) == (100, 10)
    assert args.slurm_init_seconds_before_status_checks == 5
    assert (args.slurm_status_command == "squeue") == (status == "squeue")
    assert args.group_components == {
        "metrics_{pair}_seed{seed}": 100,
        "draws_seed{seed}": 100,
        "cell_{cell}": 100,
        "tables": 100,
    }
    monkeypatch.setenv("SLURM_PARTITION", "debug")
    assert parse_args(["-n", "--profile", "profiles/slurm"])[1].cores == 4


# --- On a single-node Slurm -------------------------------------------------------------------------------
DAEMONS = ("munged", "slurmctld", "slurmd", "slurmstepd", "slurmscriptd")


def daemons():
    """{pid: name} of the processes running a Slurm or munge daemon."""
    found = {}
    for proc in Path("/proc").iterdir():
        try:
            name = (proc / "comm").read_text().strip()
        except OSError:
            continue
        if proc.name.isdigit() and name in DAEMONS:
            found[int(proc.name)] = name
    return found


def slurm_up(*args, timeout=900):
    result = subprocess.run([str(SLURM_UP), *args], capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"slurm-up {' '.join(args)}: {result.stderr[-2000:]}"
    return result


@real_slurm
def test_slurm_up_stops_every_daemon_it_started():
    conf, state = Path("/etc/slurm/slurm.conf"), Path(os.environ.get("SLURM_UP_DIR", "/tmp/slurm-up"))
    before, conf_before = daemons(), conf.read_bytes() if conf.exists() else None
    try:
        slurm_up("start")
        started = {int(pid): name for pid, name in (line.split() for line in (state / "pids").read_text().splitlines())}
        assert sorted(started.values()) == ["munged", "slurmctld", "slurmd"]
        assert all(daemons().get(pid) == name for pid, name in started.items())
        job = subprocess.run(["srun", "hostname"], capture_output=True, text=True, timeout=60)
        assert job.returncode == 0 and job.stdout.strip() == os.uname().nodename.split(".")[0]
        slurm_up("stop")
    finally:
        subprocess.run([str(SLURM_UP), "stop"], capture_output=True, timeout=120)
    assert not set(started) & set(daemons()) and set(daemons()) <= set(before)
    assert not state.exists()
    assert (conf.read_bytes() if conf.exists() else None) == conf_before


def relative(path):
    """`path` relative to the checkout: a relative `workdir` for --config."""
    return os.path.relpath(path, ROOT)


class Canceller(threading.Thread):
    """Cancels the first training job seen running (once it has run a second), as a user's scancel would."""

    def __init__(self):
        super().__init__(daemon=True)
        self.jobid, self.done = None, threading.Event()

    def run(self):
        while not self.done.is_set() and self.jobid is None:
            out = subprocess.run(
                ["squeue", "-h", "-t", "R", "-o", "%i|%k|%M"], capture_output=True, text=True, timeout=30
            ).stdout
            for jobid, comment, ran in (line.split("|") for line in out.splitlines()):
                if comment.startswith("rule_train_") and ran not in ("0:00",):
                    subprocess.run(["scancel", jobid], check=True, timeout=30)
                    self.jobid = jobid
                    break
            time.sleep(0.25)


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    """The smoke config built locally (the README's command) and through profiles/slurm on a single-node Slurm
    (docs/cluster.md's), each in a folder of its own given as a relative `workdir`; a training job of the
    cluster run is cancelled while it runs. The cluster stays up for the module's tests. (local folder,
    cluster folder, cluster run's output, the
    cancelled Slurm job id)."""
    base = tmp_path_factory.mktemp("smoke")
    local, cluster = base / "local", base / "cluster"
    result = subprocess.run(
        [*SNAKEMAKE, "--cores", "2", *SMOKE, "--config", f"workdir={relative(local)}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    slurm_up("start")
    try:
        canceller = Canceller()
        canceller.start()
        result = subprocess.run(
            [*SNAKEMAKE, *SMOKE, "--profile", "profiles/slurm", "--config", f"workdir={relative(cluster)}"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=1500,
        )
        canceller.done.set()
        yield local, cluster, result.stdout + result.stderr, canceller.jobid
    finally:
        slurm_up("stop", timeout=120)


@real_slurm
def test_the_smoke_config_through_the_profile_gives_the_local_tables(smoke):
    local, cluster, output, _ = smoke
    assert "Nothing to be done" not in output and re.search(r"47 of 47 steps \(100%\) done", output), output[-3000:]
    tables = sorted(p.relative_to(local) for p in (local / "results").rglob("*.parquet"))
    assert len(tables) >= 50
    assert tables == sorted(p.relative_to(cluster) for p in (cluster / "results").rglob("*.parquet"))
    for table in tables:
        pd.testing.assert_frame_equal(pd.read_parquet(local / table), pd.read_parquet(cluster / table), obj=str(table))
    assert (cluster / "figures/fig1.pdf").stat().st_size > 10_000


@real_slurm
def test_a_cancelled_training_job_is_retried_and_the_run_ends(smoke):
    _, _, output, jobid = smoke
    assert jobid is not None, "no training job was seen running to cancel"
    assert f"SLURM-job '{jobid}' failed, SLURM status is: 'CANCELLED'" in output, output[-3000:]
    assert "Trying to restart job" in output


@real_slurm
def test_a_relative_d_is_the_working_directory_of_every_job(smoke, tmp_path):
    """-d wins over the config's workdir, and each job works there too, not in -d within -d."""
    target = "results/corpus/shard0.parquet"
    result = subprocess.run(
        [
            *SNAKEMAKE,
            target,
            "--configfile",
            "configs/smoke.yaml",
            "--profile",
            "profiles/slurm",
            "-d",
            relative(tmp_path / "d"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "d" / target).stat().st_size > 0 and not (tmp_path / "d" / "runs").exists()


def slurm_jobs():
    """Every job slurmctld still knows (MinJobAge keeps finished ones), as {field: value} from scontrol."""
    out = subprocess.run(["scontrol", "show", "job", "-o"], capture_output=True, text=True, timeout=30).stdout
    return [dict(re.findall(r"(\w+(?:/\w+)?)=(\S*)", line)) for line in out.splitlines() if line.strip()]


@real_slurm
def test_each_rules_threads_memory_and_runtime_reach_its_slurm_job(smoke):
    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    config["train"].update(yaml.safe_load((ROOT / "configs/smoke.yaml").read_text())["train"])
    jobs = {job["JobId"]: job for job in slurm_jobs()}
    train = [job for job in jobs.values() if job["Comment"].startswith("rule_train_")]
    assert len(train) == 10  # nine runs, one of them twice (the cancelled one)
    for job in train:  # the rule's threads, mem_mb=4000, runtime=120
        assert (job["NumCPUs"], job["MinMemoryNode"], job["TimeLimit"]) == (
            str(config["train"]["threads"]),
            "4000M",
            "02:00:00",
        ), job
    tables = next(job for job in jobs.values() if job["Comment"].startswith("rule_tables_"))
    # fig1 (2000 MB, 10 min) beside claims (4000 MB, 10 min), then the claims figure (10 min) after claims
    assert (tables["NumCPUs"], tables["MinMemoryNode"], tables["TimeLimit"]) == ("2", "6000M", "00:20:00")
    metrics = [job for job in jobs.values() if job["Comment"].startswith("rule_metrics_main_seed")]
    assert len(metrics) == 3 and all(job["NumCPUs"] == "2" for job in metrics)  # as wide as the node, no wider


@real_slurm
def test_a_job_failing_on_bad_input_ends_with_our_one_line_error(smoke):
    """A token set asked of more draws than any token has: the job's Slurm log and snakemake's own output
    both carry the script's one line."""
    _, cluster, _, _ = smoke
    line = "error: only 0 tokens were drawn at least 1000000 times in training (analysis.min_count)"
    result = subprocess.run(
        [
            *SNAKEMAKE,
            "results/token_sets/main/seed0.parquet",
            "--configfile",
            "configs/smoke.yaml",
            "--profile",
            "profiles/slurm",
            "--config",
            f"workdir={relative(cluster)}",
            "analysis={min_count: 1000000}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = result.stdout + result.stderr
    assert result.returncode != 0 and line in output, output[-3000:]
    logs = list((cluster / ".snakemake/slurm_logs").rglob("*.log"))
    assert any(line in log.read_text() for log in logs), [str(log) for log in logs]

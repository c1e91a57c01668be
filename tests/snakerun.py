"""Run the workflow through snakemake in a directory, as the tests do."""
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def snakemake(workdir, *args, config=None, env=None):
    """Run snakemake on `workdir`/config.yaml (written from `config` when given), a whole config that replaces
    the checkout's config.yaml (--replace-workflow-config); CompletedProcess."""
    if config is not None:
        (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    cmd = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "-d", str(workdir), "--cores", "2",
           *args, "--replace-workflow-config", "--configfile", str(workdir / "config.yaml")]
    return subprocess.run(cmd, capture_output=True, text=True, env=env)


def copy_build(built, workdir):
    """A built directory's copy in `workdir` (outputs, logs and snakemake's records with their times), so a
    test can change it and snakemake still finds the copied jobs up to date."""
    shutil.copytree(built, workdir, symlinks=True, dirs_exist_ok=True)
    return workdir


def planned_jobs(result):
    """rule -> job count from a dry run's job stats."""
    stats = result.stdout.split("Job stats:")[1].split("Reasons:")[0]
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)$", stats, re.M) if m[1] != "total"}

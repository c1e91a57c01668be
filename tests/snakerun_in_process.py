"""Run the workflow's snakemake in the test's own process: what `snakerun.snakemake` gives for runs that stop
while the Snakefile is read (a config error), without starting an interpreter and importing snakemake for each."""
import os
import subprocess
import sys

import yaml
from snakemake.cli import main

from snakerun import ROOT


def snakemake(workdir, *args, config, capfd, monkeypatch):
    """snakerun.snakemake's command line, run by `cli` here."""
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    return cli(["-s", str(ROOT / "Snakefile"), "-d", str(workdir), "--cores", "2", *args,
                "--replace-workflow-config", "--configfile", str(workdir / "config.yaml")],
               capfd=capfd, monkeypatch=monkeypatch)


def cli(argv, *, capfd, monkeypatch):
    """`snakemake ARGV` run by snakemake.cli.main here: a CompletedProcess whose returncode and stderr are what
    the interpreter would have given (a sys.exit message ends stderr, exit status 1). The Snakefile's changes
    to sys.path, PYTHONPATH and the working directory are undone after the test."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
    monkeypatch.chdir(os.getcwd())
    capfd.readouterr()
    try:
        main(argv)
        code = 0
    except SystemExit as exit:
        code = exit.code
    out, err = capfd.readouterr()
    if isinstance(code, str):
        err, code = err + code + "\n", 1
    return subprocess.CompletedProcess(argv, code or 0, out, err)

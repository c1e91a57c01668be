"""Run the workflow through snakemake in a directory, as the tests do."""

import os
import re
import shutil
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def snakemake(workdir, *args, config=None, env=None):
    """Run snakemake on `workdir`/config.yaml (written from `config` when given), a whole config that replaces
    the checkout's config.yaml (--replace-workflow-config); CompletedProcess. A dry run (-n) runs in this
    process (`cli`), unless it has an `env` of its own (modules imported here have read theirs), any other run
    in a new interpreter."""
    if config is not None:
        (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    argv = [
        "-s",
        str(ROOT / "Snakefile"),
        "-d",
        str(workdir),
        "--cores",
        "2",
        *args,
        "--replace-workflow-config",
        "--configfile",
        str(workdir / "config.yaml"),
    ]
    if "-n" in args and env is None:
        return cli(argv)
    return subprocess.run([sys.executable, "-m", "snakemake", *argv], capture_output=True, text=True, env=env)


def cli(argv):
    """`snakemake ARGV` run by snakemake.cli.main in this process (as the command runs it, without an
    interpreter start and snakemake's import, 2 s a run): a CompletedProcess with the returncode, stdout and
    stderr the command would have given (a sys.exit message ends stderr, exit status 1). The environment, the
    working directory and sys.path, which the Snakefile changes, are restored after it."""
    from snakemake.cli import main

    saved = dict(os.environ), os.getcwd(), list(sys.path)
    try:
        with _captured() as (out, err):
            try:
                main(argv)
                code = 0
            except SystemExit as exit:
                code = exit.code
    finally:
        os.environ.clear()
        os.environ.update(saved[0])
        os.chdir(saved[1])
        sys.path[:] = saved[2]
    out, err = (_read(f) for f in (out, err))
    if isinstance(code, str):
        err, code = err + code + "\n", 1
    return subprocess.CompletedProcess(argv, code or 0, out, err)


@contextmanager
def _captured():
    """sys.stdout and sys.stderr, and the file descriptors 1 and 2 beneath them, into two files, read as text
    once the block ends (pytest's capture puts its own objects in sys.stdout and sys.stderr)."""
    files = [tempfile.TemporaryFile("w+", encoding="utf-8") for _ in range(2)]
    streams = sys.stdout, sys.stderr
    for stream in streams:
        stream.flush()
    saved = [os.dup(1), os.dup(2)]
    try:
        for fd, f in zip((1, 2), files):
            os.dup2(f.fileno(), fd)
        sys.stdout, sys.stderr = files
        yield files
    finally:
        for f in files:
            f.flush()
        sys.stdout, sys.stderr = streams
        for fd, old in zip((1, 2), saved):
            os.dup2(old, fd)
            os.close(old)


def _read(file):
    """A captured file's text, from its start; the file closed."""
    with file:
        file.seek(0)
        return file.read()


def copy_build(built, workdir):
    """A built directory's copy in `workdir` (outputs, logs and snakemake's records with their times), so a
    test can change it and snakemake still finds the copied jobs up to date."""
    shutil.copytree(built, workdir, symlinks=True, dirs_exist_ok=True)
    return workdir


def planned_jobs(result):
    """rule -> job count from a dry run's job stats."""
    stats = result.stdout.split("Job stats:")[1].split("Reasons:")[0]
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)$", stats, re.M) if m[1] != "total"}

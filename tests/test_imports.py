"""The package keeps the import layers of pyproject.toml's [tool.importlinter], and that contract
would catch the training loop importing the launcher again (the circle issue 23 removed)."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def lint(pythonpath):
    """lint-imports on the `tying` found first on `pythonpath`, in a fresh process: (exit status, report)."""
    code = ("import sys; from importlinter.cli import lint_imports; "
            f"sys.exit(lint_imports(config_filename={str(ROOT / 'pyproject.toml')!r}, no_cache=True, no_logo=True))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(pythonpath)})
    return done.returncode, done.stdout + done.stderr


def test_the_package_keeps_its_import_layers():
    status, report = lint(ROOT / "src")
    assert status == 0, report


def test_the_training_loop_importing_the_launcher_breaks_the_contract(tmp_path):
    shutil.copytree(ROOT / "src" / "tying", tmp_path / "tying", ignore=shutil.ignore_patterns("__pycache__"))
    with open(tmp_path / "tying" / "train.py", "a") as f:
        f.write("\nfrom tying.distributed import launch\n")
    status, report = lint(tmp_path)
    assert status == 1 and "BROKEN" in report and "tying.train -> tying.distributed" in report, report

"""The package keeps the import contracts of pyproject.toml's [tool.importlinter]: its stages in layers, the
DAG's modules (tying.plan) free of the compute stack, the launcher above the training loop; each contract
is shown to fail when a forbidden import is added."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def lint(pythonpath):
    """lint-imports on the `tying` found first on `pythonpath`, in a fresh process: (exit status, report)."""
    code = (
        "import sys; from importlinter.cli import lint_imports; "
        f"sys.exit(lint_imports(config_filename={str(ROOT / 'pyproject.toml')!r}, no_cache=True, no_logo=True))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(pythonpath)}
    )
    return done.returncode, done.stdout + done.stderr


def test_the_package_keeps_its_import_layers():
    status, report = lint(ROOT / "src")
    assert status == 0, report


def lint_with(tmp_path, module, line):
    """lint() on a copy of the package with `line` appended to `module` (a path under tying/)."""
    shutil.copytree(ROOT / "src" / "tying", tmp_path / "tying", ignore=shutil.ignore_patterns("__pycache__"))
    with open(tmp_path / "tying" / module, "a") as f:
        f.write(f"\n{line}\n")
    return lint(tmp_path)


def test_the_training_loop_importing_the_launcher_breaks_the_contract(tmp_path):
    status, report = lint_with(tmp_path, "train/loop.py", "from tying.train.distributed import launch")
    assert status == 1 and "BROKEN" in report and "tying.train.loop -> tying.train.distributed" in report, report


def test_a_metric_importing_the_claims_breaks_the_stages(tmp_path):
    status, report = lint_with(tmp_path, "metrics/alignment.py", "from tying.claims.definitions import CLAIMS")
    assert status == 1 and "stages, each importing only the stages below it BROKEN" in report, report
    assert "tying.metrics.alignment -> tying.claims.definitions" in report, report


def test_the_plan_importing_torch_breaks_its_contract(tmp_path):
    status, report = lint_with(tmp_path, "plan/memory.py", "import torch")
    assert status == 1 and "import no compute stack BROKEN" in report and "tying.plan.memory -> torch" in report, report


HEAVY = (
    "torch",
    "scipy",
    "transformers",
    "matplotlib",
    "seaborn",
    "sklearn",
    "tokenizers",
    "safetensors",
    "tying.claims",
    "tying.stats",
)


def test_building_the_dag_imports_nothing_heavier_than_the_config_s_modules(tmp_path):
    """A no-op pays for every import the Snakefile makes: planning the micro config's whole DAG, each job's
    resources evaluated as a dry run prints them, imports none of the compute stack (what snakemake itself
    imports, pandas among it, is the baseline)."""
    (tmp_path / "config.yaml").write_text((ROOT / "tests" / "micro.yaml").read_text())
    code = (
        "import json, sys; from snakemake.cli import main; before = set(sys.modules)\n"
        "try:\n"
        f"    main(['-s', {str(ROOT / 'Snakefile')!r}, '-d', {str(tmp_path)!r}, '--cores', '2', '-n',\n"
        f"          '--replace-workflow-config', '--configfile', {str(tmp_path / 'config.yaml')!r}])\n"
        "except SystemExit as exit:\n"
        "    assert not exit.code, exit.code\n"
        "print(json.dumps(sorted(set(sys.modules) - before)))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    imported = json.loads(done.stdout.splitlines()[-1])
    assert "tying.plan.pairs" in imported and "tying.plan.config" in imported
    assert not [m for m in imported if m in HEAVY or m.startswith(tuple(h + "." for h in HEAVY))]

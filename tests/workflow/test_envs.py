"""Software deployment: the rules' conda environment, the container image built from the same pins,
and jobs that import `tying` from the workflow tree in a Python without the package installed."""

import ast
import importlib.metadata
import json
import os
import re
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pandas as pd
import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from snakemake.api import SnakemakeApi
from snakemake.settings.enums import Quietness
from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings
from snakerun import ROOT, snakemake

SRC = ROOT / "src"
CONFIG = yaml.safe_load((ROOT / "config.yaml").read_text())
MICRO = yaml.safe_load((ROOT / "tests" / "micro.yaml").read_text())
PINS = {
    canonicalize_name(name): version
    for name, version in (line.split("==") for line in (ROOT / "constraints.txt").read_text().split() if "==" in line)
}
# The optional extras (lm-eval for Table 7's zero-shot accuracies) are pinned in pyproject.toml instead.
PINS |= {
    canonicalize_name(name.split("[")[0]): version
    for extra in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"].values()
    for name, version in (entry.split("==") for entry in extra)
}
# A pip entry is a name pinned to a version and nothing else: no path, URL, option or editable install.
PINNED = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([0-9][0-9A-Za-z.+!-]*)$")


def load_rules(workdir):
    """[(rule, conda environment file, script)] as Snakemake parses the default config, and the
    PYTHONPATH the Snakefile leaves for jobs."""
    (workdir / "config.yaml").write_text(yaml.safe_dump(CONFIG))
    with pytest.MonkeyPatch.context() as mp:  # the Snakefile edits sys.path and PYTHONPATH
        mp.setattr(sys, "path", list(sys.path))
        mp.setenv("PYTHONPATH", "")
        with SnakemakeApi(OutputSettings(quiet={Quietness.ALL})) as api:
            workflow = api.workflow(
                resource_settings=ResourceSettings(),
                snakefile=ROOT / "Snakefile",
                config_settings=ConfigSettings(configfiles=[workdir / "config.yaml"]),
                workdir=workdir,
            )._workflow
            pythonpath = os.environ["PYTHONPATH"]
            rules = []
            for rule in workflow.rules:
                base = Path(rule.basedir.get_path_or_uri(secret_free=True))
                env = rule.conda_env and (base / rule.conda_env).resolve()
                rules.append((rule.name, env, rule.script and (base / rule.script).resolve()))
    return rules, pythonpath


@pytest.fixture(scope="module")
def parsed(tmp_path_factory):
    return load_rules(tmp_path_factory.mktemp("rules"))


def environment(path):
    """(conda dependencies, pip entries) of an environment file."""
    deps = yaml.safe_load(path.read_text())["dependencies"]
    return [d for d in deps if isinstance(d, str)], [e for d in deps if isinstance(d, dict) for e in d["pip"]]


def pinned(entries, where):
    """{canonical name: version} of pip entries; fails on anything but a name pinned to a version."""
    loose = [e for e in entries if not PINNED.match(e)]
    assert not loose, f"{where}: not a pinned package: {loose}"
    return {canonicalize_name(n): v for n, v in (PINNED.match(e).groups() for e in entries)}


def imported_names(path):
    """Every dotted name a Python file imports, with `from a import b` giving both a and a.b."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


def tying_module(name):
    """The file of a module under src/, or None (a name imported from a module, not a module)."""
    base = SRC.joinpath(*name.split("."))
    return next((p for p in (base.with_suffix(".py"), base / "__init__.py") if p.exists()), None)


def third_party_imports(script):
    """Top-level third-party modules a script imports, following its imports through the tying package."""
    todo, seen, found = [script], set(), set()
    while todo:
        for name in imported_names(todo.pop()):
            parts = name.split(".")
            if parts[0] != "tying":
                found |= {parts[0]} - set(sys.stdlib_module_names)
                continue
            for module in filter(None, (tying_module(".".join(parts[:i])) for i in range(1, len(parts) + 1))):
                if module not in seen:
                    seen.add(module)
                    todo.append(module)
    return found


def runtime_dependencies():
    """pyproject's dependencies that jobs need: all but the executor plugins (the submitting process's)."""
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {canonicalize_name(Requirement(d).name) for d in deps}
    return {n for n in names if not n.startswith("snakemake-executor-plugin-")}


def test_every_rule_environment_pins_what_its_script_imports_without_a_local_path(parsed):
    rules, _ = parsed
    distributions = importlib.metadata.packages_distributions()
    scripted = [(name, env, script) for name, env, script in rules if script]
    assert len(scripted) >= 20 and all(env for _, env, _ in scripted), [n for n, env, _ in scripted if not env]
    for name, env, script in scripted:
        conda, entries = environment(env)
        pip = pinned(entries, f"rule {name}: {env.name}")
        assert all(re.fullmatch(r"[a-z0-9_-]+(=[0-9.]+)?", dep) for dep in conda), (env.name, conda)
        assert "python=3.11" in conda and "pip" in conda
        # A module of an optional extra that is not installed here (lm_eval) is named as its distribution.
        needed = {canonicalize_name(d) for m in third_party_imports(script) for d in distributions.get(m, [m])}
        assert needed, f"{script.name}: no imports found"
        missing = sorted((needed | runtime_dependencies()) - set(pip))
        assert not missing, f"rule {name}: {env.name} lacks {missing} ({script.name} or pyproject needs them)"
        assert {n: PINS.get(n) for n in pip} == pip, f"{env.name}: pins differ from constraints.txt"


def test_import_scan_follows_the_package_into_its_modules():
    found = third_party_imports(ROOT / "workflow" / "scripts" / "figure.py")
    assert {"matplotlib", "seaborn", "pandas"} <= found  # imported by tying.report.figures.*, not by the script
    assert not {"os", "tying", "json"} & found


def test_the_image_installs_every_rule_environments_pins():
    dockerfile = (ROOT / "Dockerfile").read_text()
    env = ROOT / "workflow" / "envs" / "eval.yaml"
    conda, entries = environment(env)
    extract = re.search(r"sed -n '([^']+)' /tmp/pins/eval\.yaml", dockerfile)[1]
    listed = subprocess.run(["sed", "-n", extract, str(env)], capture_output=True, text=True, check=True).stdout
    assert listed.split() == entries
    assert set(environment(ROOT / "workflow" / "envs" / "tying.yaml")[1]) <= set(entries)  # every rule's packages
    assert re.search(r"^FROM python:3\.11-", dockerfile, re.M) and "python=3.11" in conda
    assert "-c /tmp/pins/constraints.txt" in dockerfile


def test_the_person_environment_lists_every_dependency_as_pinned():
    conda, entries = environment(ROOT / "environment.yml")
    assert entries.count("-e .") == 1 and "python=3.11" in conda  # the one local path: this checkout
    pip = pinned([e for e in entries if e != "-e ."], "environment.yml")
    assert runtime_dependencies() <= set(pip)
    assert {n: PINS.get(n) for n in pip} == pip


def test_jobs_and_the_processes_they_start_get_the_tree_on_pythonpath(parsed):
    _, pythonpath = parsed
    assert pythonpath.split(os.pathsep)[0] == str(SRC)


@pytest.fixture(scope="module")
def python_without_tying(tmp_path_factory):
    """A venv that sees this one's third-party packages but not its editable install of tying."""
    env = tmp_path_factory.mktemp("python") / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    python = env / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # A path listed in a .pth file joins sys.path, but the .pth files inside it (the editable hook) do not run.
    (Path(purelib) / "third_party.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def test_a_workflow_script_imports_tying_from_the_tree_in_a_python_without_it(python_without_tying, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    probe = subprocess.run(
        [python_without_tying, "-c", "import pandas, snakemake, torch; import tying"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert "No module named 'tying'" in probe.stderr  # the third-party packages import, tying does not
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps({"text": f"document number {i}"}) + "\n" for i in range(40)))
    config = {**MICRO, "corpus": {"source": "local", "paths": [str(docs)]}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    run = subprocess.run(
        [
            python_without_tying,
            "-m",
            "snakemake",
            "--until",
            "corpus",
            "-s",
            ROOT / "Snakefile",
            "-d",
            tmp_path,
            "--cores",
            "1",
            "--replace-workflow-config",
            "--configfile",
            tmp_path / "config.yaml",
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    written = sorted((tmp_path / "results" / "corpus").glob("*.parquet"))
    assert written and sum(len(pd.read_parquet(path)) for path in written) == 40


@pytest.fixture
def tool_stubs(tmp_path):
    """PATH with stand-ins for conda and apptainer that answer only what a dry run asks: conda its
    prefix, platform, version and channel priority, apptainer its version. Any other call fails."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    info = json.dumps({"conda_prefix": str(tmp_path / "conda"), "platform": "linux-64"})
    answers = {
        "conda": {
            "info --json": info,
            "--version": "conda 24.7.1",
            "config --get channel_priority --json": '{"get": {"channel_priority": "strict"}}',
        },
        "apptainer": {"--version": "apptainer version 1.3.4"},
    }
    for tool, replies in answers.items():
        cases = "".join(f"  '{args}') echo '{reply}';;\n" for args, reply in replies.items())
        (bin_dir / tool).write_text(f'#!/bin/sh\ncase "$*" in\n{cases}  *) exit 1;;\nesac\n')
        (bin_dir / tool).chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


def test_a_conda_dry_run_plans_the_default_config(tool_stubs, tmp_path):
    run = snakemake(tmp_path, "-n", "--sdm", "conda", config=CONFIG, env=tool_stubs)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "tying.yaml will be created" in run.stdout and "Job stats:" in run.stdout


def test_apptainer_runs_need_an_image(tool_stubs, tmp_path):
    image = tmp_path / "tying.sif"
    env = {**tool_stubs, "TYING_IMAGE": str(image)}
    missing = snakemake(tmp_path, "-n", "--sdm", "apptainer", config=MICRO, env=env)
    assert missing.returncode == 1
    assert missing.stderr.strip().splitlines()[-1] == (
        f"error: --sdm apptainer: no image {image}; build it (docs/cluster.md, Software deployment) or set TYING_IMAGE"
    )
    image.touch()
    planned = snakemake(tmp_path, "-n", "--sdm", "apptainer", config=MICRO, env=env)
    assert planned.returncode == 0 and "Job stats:" in planned.stdout, planned.stderr[-3000:]

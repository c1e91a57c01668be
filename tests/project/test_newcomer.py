"""What a newcomer meets first: overlays merge over config.yaml, each shipped config builds in its own
folder, the documented pages cover every key, the repository is self-contained, a damaged checkpoint
gives one line, and the conda environment states the test extra's pins (issue 30)."""

import re
import subprocess
import sys
import tomllib

import pytest
import yaml
from snakerun import ROOT, planned_jobs

from tying.errors import PipelineError
from tying.plan.layers import layered, load, overlay

MICRO = yaml.safe_load((ROOT / "tests" / "micro.yaml").read_text())
CONFIGS = sorted(p.name for p in (ROOT / "configs").glob("*.yaml"))


def run(cwd, *args):
    """snakemake started in `cwd` with no -d, as the docs' commands are started in the checkout."""
    cmd = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--cores", "2", *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)


# --- Overlays ------------------------------------------------------------------------------------------
def test_merge_keeps_what_an_overlay_leaves_and_replaces_what_it_names():
    base = {
        "train": {"steps": 300, "lr": 0.003},
        "pairs": {"main": {"a": 1}, "family": {"b": 2}},
        "architectures": {"olmo": {"family": "olmo"}, "gpt_neox": {"family": "gpt_neox"}},
        "seeds": [0, 1],
    }
    merged = overlay(
        base, {"train": {"steps": 100}, "pairs": {"solo": {"c": 3}}, "architectures": {"gpt_neox": None}, "seeds": [0]}
    )
    assert merged == {
        "train": {"steps": 100, "lr": 0.003},
        "pairs": {"solo": {"c": 3}},
        "architectures": {"olmo": {"family": "olmo"}},
        "seeds": [0],
    }
    assert base["train"]["steps"] == 300  # the base is not changed


def test_a_config_file_with_one_key_plans_and_its_value_wins(tmp_path):
    (tmp_path / "one.yaml").write_text("seeds: [0]\n")
    config = layered(ROOT / "config.yaml", [tmp_path / "one.yaml"])
    assert config["seeds"] == [0] and config["train"] == yaml.safe_load((ROOT / "config.yaml").read_text())["train"]
    result = run(tmp_path, "-n", "figures/fig1.pdf", "--configfile", "one.yaml")
    assert result.returncode == 0, result.stderr[-2000:]
    assert planned_jobs(result)["train"] == 2  # tied and untied of seed 0 alone: the overlay's seeds won


def test_an_overlay_that_extends_another_is_laid_over_it_and_a_circle_is_one_line(tmp_path):
    assert load("configs/large-batch.yaml") == load("configs/trained.yaml", "configs/large-batch.yaml")
    assert load("configs/large-batch.yaml")["corpus"]["source"] == "docstrings"  # trained.yaml's, not config.yaml's
    (tmp_path / "a.yaml").write_text("extends: b.yaml\nseeds: [0]\n")
    (tmp_path / "b.yaml").write_text("extends: a.yaml\n")
    with pytest.raises(PipelineError, match="extends itself"):
        load(tmp_path / "a.yaml")


def test_seeds_on_the_command_line_reach_every_pair_that_follows_them(tmp_path):
    result = run(tmp_path, "-n", "all", "--config", "seeds=[0]")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "seed=1" not in result.stdout and "seed1" not in result.stdout


@pytest.mark.parametrize("name", CONFIGS)
def test_each_shipped_config_is_an_overlay_with_its_own_folder(name):
    raw = yaml.safe_load((ROOT / "configs" / name).read_text())
    assert raw["workdir"] == f"runs/{name.removesuffix('.yaml')}"
    assert load(f"configs/{name}")["workdir"] == raw["workdir"]


# --- Outputs that cannot clash -------------------------------------------------------------------------
def test_another_config_as_documented_leaves_the_default_build_up_to_date(tmp_path):
    # The default build in tmp_path (micro-sized), then a config with other data parameters run as the docs
    # run configs/*.yaml (no -d; it names its workdir), then the default again: nothing to do.
    (tmp_path / "default.yaml").write_text(yaml.safe_dump(MICRO))
    other = {**MICRO, "workdir": "runs/other", "tokenizer": {"vocab_size": 280}}
    (tmp_path / "other.yaml").write_text(yaml.safe_dump(other))
    target = "results/tokenizer"  # the corpus and the tokenizer, which the other vocabulary changes
    default = ("--replace-workflow-config", "--configfile", "default.yaml")
    assert run(tmp_path, target, *default).returncode == 0
    built = run(tmp_path, target, "--replace-workflow-config", "--configfile", "other.yaml")
    assert built.returncode == 0, built.stderr[-2000:]
    assert (tmp_path / "runs/other" / target / "tokenizer.json").is_file()
    assert (tmp_path / "runs/other/.snakemake").is_dir()
    again = run(tmp_path, "-n", target, *default)
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr, again.stdout[-2000:]


def test_the_scaling_config_plans_in_its_own_folder(tmp_path):
    result = run(tmp_path, "-n", "all", "--configfile", str(ROOT / "configs/scaling.yaml"))
    assert result.returncode == 0, result.stderr[-2000:]
    assert (tmp_path / "runs/scaling/.snakemake").is_dir() and not (tmp_path / ".snakemake").exists()


# --- The repository is self-contained and its pages cover the config -------------------------------------
def _repository_files():
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [ROOT / f for f in listed if (ROOT / f).is_file() and not f.endswith((".pdf", ".png", ".parquet"))]


# Built from parts, so this file does not match itself.
OUTSIDE = [
    re.compile(re.escape(".." + "/shared")),
    re.compile("search" + " index", re.I),
    re.compile(r"\bdoc" + r" \d{5,}"),
    re.compile("API" + " memo"),
]


def test_no_file_points_outside_the_repository_or_to_search_index_ids():
    found = []
    for path in _repository_files():
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        found += [f"{path.relative_to(ROOT)}: {p.pattern}" for p in OUTSIDE if p.search(text)]
    assert not found, found


def _schema_keys(node, path=()):
    """Every property's dotted path in the schema (patternProperties as <name>), following $refs."""
    keys = []
    for name, sub in node.get("properties", {}).items():
        keys.append(path + (name,))
        keys += _schema_keys(sub, path + (name,))
    for sub in node.get("patternProperties", {}).values():
        keys += _schema_keys(sub, path + ("<name>",))
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), dict):
            keys += _schema_keys(node[key], path + (("<name>",) if key == "additionalProperties" else ()))
    for key in ("oneOf", "anyOf", "allOf"):
        for sub in node.get(key, []):
            keys += _schema_keys(sub, path)
    return keys


def test_every_schema_key_is_in_the_configuration_page():
    schema = yaml.safe_load((ROOT / "workflow/schemas/config.schema.yaml").read_text())
    page = (ROOT / "docs/configuration.md").read_text()
    fences = re.findall(r"^```.*?^```", page, re.M | re.S)  # code blocks, then the inline spans of the rest
    quoted = " ".join(fences + re.findall(r"`([^`]+)`", re.sub(r"^```.*?^```", "", page, flags=re.M | re.S)))
    missing = sorted({".".join(k) for k in _schema_keys(schema) if not re.search(rf"\b{re.escape(k[-1])}\b", quoted)})
    assert not missing, missing


# --- The conda environment states the test extra's pins -------------------------------------------------
def _pins(text):
    return {
        m[1].lower().replace("_", "-"): m[2]
        for m in re.finditer(r"^\s*-?\s*([A-Za-z0-9_.-]+)\s*==?\s*([\w.]+)", text, re.M)
    }


def test_environment_yml_lists_every_pin_of_the_test_extra_as_constraints_txt_does():
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["test"]
    names = {re.split(r"[=<>\[ ]", req)[0].lower() for req in extra}
    constraints, environment = (
        _pins((ROOT / "constraints.txt").read_text()),
        _pins((ROOT / "environment.yml").read_text()),
    )
    for name in names:
        assert name in constraints, f"constraints.txt does not pin {name}"
        assert environment.get(name) == constraints[name], f"environment.yml: {name} {environment.get(name)}"
    # and every package both state, at the same version
    assert {n: v for n, v in environment.items() if n in constraints and constraints[n] != v} == {}


# --- Unknown names list the valid ones -----------------------------------------------------------------
@pytest.mark.parametrize(
    "key,value,listed",
    [
        ("arch", "gpt_neo", "unknown architecture 'gpt_neo' (architectures: olmo, gpt_neox, olmo_wide)"),
        ("variant", "tide", "unknown variant 'tide' (variants: tied, untied, tied_x5, untied_b, untied_d)"),
    ],
)
def test_an_unknown_name_lists_the_valid_ones(key, value, listed):
    from tying.errors import PipelineError
    from tying.plan.checks import check

    config = load()
    config["pairs"]["family"]["tied"][key] = value
    with pytest.raises(PipelineError) as error:
        check(config, ROOT / "workflow/schemas/config.schema.yaml")
    assert str(error.value) == f"pairs.family.tied.{key}: {listed}"

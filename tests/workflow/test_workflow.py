"""The workflow end to end through snakemake, on a micro config in a temporary directory. The tests that
start from the micro build sit here, on copies of it, so the suite builds it once."""

import os
import re

import pandas as pd
import pytest
import yaml
from helpers import HAS_LM_EVAL, needs_lm_eval, write_task
from snakerun import ROOT, cli, copy_build, planned_jobs, snakemake

from tying.plan.pairs import pair_models
from tying.rule_script import COST_LINE

MICRO = yaml.safe_load((ROOT / "tests" / "micro.yaml").read_text())


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("micro")
    result = snakemake(workdir, config=MICRO)
    assert result.returncode == 0, result.stderr[-3000:]
    return workdir


def test_micro_config_builds_the_whole_dag(built):
    ckpt = built / "results/checkpoints/olmo/tied/seed0/step6"
    assert (ckpt / "model.safetensors").exists() and (ckpt / "config.json").exists()
    assert (built / "results/train/gpt_neox/untied/seed0/provenance.parquet").exists()
    assert not list(built.glob("results/train/*/*/*/work"))
    assert "step 6/6" in (built / "logs/train/olmo/tied/seed0.log").read_text()
    assert snakemake(built, "-n").stdout.count("Nothing to be done") == 1


def test_every_job_log_ends_with_its_cost_and_no_rule_samples_a_benchmark(built):
    logs = sorted((built / "logs").rglob("*.log"))
    costs = {log.relative_to(built).as_posix(): COST_LINE.match(log.read_text().splitlines()[-1]) for log in logs}
    assert len(costs) >= 40 and all(costs.values()), [log for log, cost in costs.items() if cost is None]
    train = costs["logs/train/olmo/tied/seed0.log"]  # imports torch and transformers: seconds of CPU, >100 MB
    assert 0 < float(train["cpu_seconds"]) <= 2 * float(train["seconds"]) and float(train["peak_mb"]) > 100
    assert not (built / "results/benchmarks").exists()


def test_changing_train_steps_reruns_training_and_nothing_upstream(built):
    changed = {**MICRO, "train": {**MICRO["train"], "steps": 8}}
    jobs = planned_jobs(snakemake(built, "-n", config=changed))
    snakemake(built, "-n", config=MICRO)
    assert jobs["train"] == len(list(built.glob("results/train/*/*/seed*/log.parquet"))) == 5
    assert {"alignment", "knn", "lens", "fig1", "table1", "claims"} <= set(jobs)
    assert not {"corpus", "tokenizer", "tokens_shard", "tokens"} & set(jobs)


@pytest.mark.parametrize(
    "section,key,value,message",
    [
        ("train", "steps", -5, "train.steps: -5 is less than the minimum of 1"),
        ("model", "hidden_size", "wide", "model.hidden_size: 'wide' is not of type 'integer'"),
        ("train", "speed", 3, "train: Additional properties are not allowed ('speed' was unexpected)"),
        ("train", "checkpoints", [0, 99], "train.checkpoints: [99] exceed train.steps (6)"),
        (
            "lens",
            "fisher",
            True,
            "lens.fisher: whitens the translators' output side on top of their input side; "
            "it needs lens.whiten: true",
        ),
    ],
)
def test_invalid_config_stops_with_one_line_naming_the_key(tmp_path, section, key, value, message):
    bad = {**MICRO, section: {**MICRO[section], key: value}}
    result = snakemake(tmp_path, "-n", config=bad)
    assert result.returncode != 0
    lines = [ln for ln in result.stderr.splitlines() if not ln.startswith("Using workflow specific profile")]
    assert lines == [f"config error: {message}"]
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize(
    "target,expected",
    [
        (
            "figures/fig1.pdf",
            {
                "corpus": 1,
                "tokenizer": 1,
                "tokens_shard": 1,
                "tokens": 1,
                "train": 2,
                "drawn": 1,
                "token_set": 1,
                "alignment": 1,
                "fig1": 1,
            },
        ),
        (
            "figures/fig2.pdf",
            {"corpus": 1, "tokenizer": 1, "tokens_shard": 1, "tokens": 1, "train": 2, "lens": 2, "fig_lens": 1},
        ),
        (
            "figures/fig4.pdf",
            {"corpus": 1, "tokenizer": 1, "tokens_shard": 1, "tokens": 1, "train": 1, "grad_flow": 1, "fig4": 1},
        ),
        (
            "figures/fig3.pdf",
            {
                "corpus": 1,
                "tokenizer": 1,
                "tokens_shard": 1,
                "tokens": 1,
                "drawn": 1,
                "token_set": 1,
                "train": 1,
                "evolution": 1,
                "fig_evolution": 1,
            },
        ),
        # Figure 5 and Tables 5 and 6 are other rules' `use rule ... with:` copies: only their own metric is planned
        (
            "figures/fig5.pdf",
            {
                "corpus": 1,
                "tokenizer": 1,
                "tokens_shard": 1,
                "tokens": 1,
                "drawn": 1,
                "token_set": 1,
                "train": 2,
                "norm_freq": 1,
                "fig5": 1,
            },
        ),
        # one drawn-count job for the two pairs: they share their runs' shape (seed, steps, batch, length)
        (
            "results/tables/table5.csv",
            {
                "corpus": 1,
                "tokenizer": 1,
                "tokens_shard": 1,
                "tokens": 1,
                "drawn": 1,
                "token_set": 2,
                "train": 4,
                "knn": 2,
                "table5": 1,
            },
        ),
        (
            "results/tables/table6.csv",
            {
                "corpus": 1,
                "tokenizer": 1,
                "tokens_shard": 1,
                "tokens": 1,
                "drawn": 1,
                "token_set": 1,
                "train": 3,
                "scaling": 1,
                "table6": 1,
            },
        ),
    ],
)
def test_a_figure_target_plans_only_what_it_needs(tmp_path, target, expected):
    result = snakemake(tmp_path, "-n", target, config=MICRO)
    assert result.returncode == 0, result.stderr[-2000:]
    assert planned_jobs(result) == expected


def test_report_holds_every_enabled_figure(built):
    report = built / "report.html"
    result = snakemake(built, "--report", str(report))
    assert result.returncode == 0, result.stderr[-2000:]
    html = report.read_text(errors="replace")
    for fig in MICRO["figures"]:
        assert f"{fig}.pdf" in html
    assert "claims.md" in html


def test_a_figure_style_change_reruns_only_that_figure(built):
    changed = {**MICRO, "analysis": {**MICRO["analysis"], "norm_bins_per_decade": 8}}
    jobs = planned_jobs(snakemake(built, "-n", config=changed))
    snakemake(built, "-n", config=MICRO)
    assert jobs == {"fig5": 1, "all": 1}


def test_the_held_out_share_reruns_only_the_fitted_alignments_and_what_reads_them(built):
    changed = {**MICRO, "analysis": {**MICRO["analysis"], "held_out": 0.3}}
    jobs = planned_jobs(snakemake(built, "-n", config=changed))
    snakemake(built, "-n", config=MICRO)
    assert jobs == {
        "alignment": 2,
        "scaling": 1,
        "fig1": 1,
        "table1": 1,
        "table2": 1,
        "table6": 1,
        "claims": 1,
        "claims_figure": 1,
        "all": 1,
    }


def test_adding_a_seed_reruns_only_the_new_seed_and_the_aggregates(built):
    result = snakemake(built, "-n", config={**MICRO, "seeds": [0, 1]})
    jobs = planned_jobs(result)
    wildcards = re.findall(r"wildcards: (.*)", result.stdout)
    seeds = {m for w in wildcards for m in re.findall(r"seed=(\d+)", w)}
    assert seeds == {"1"}
    assert jobs["train"] == 5 and not {"corpus", "tokenizer", "tokens_shard", "tokens"} & set(jobs)
    assert {"fig1", "table1", "claims", "loss"} <= set(jobs)


def test_reordering_a_sections_keys_reruns_nothing(built):
    """A rule's params are compared by their repr, which follows key order: a section's keys moved about in
    config.yaml (or a default written out) must not look like a change."""
    fixed = {"corpus", "tokenizer", "model", "train", "analysis", "lens"}  # keys the schema names, not the user
    moved = {
        section: dict(reversed(MICRO[section].items())) if section in fixed else MICRO[section]
        for section in reversed(MICRO)
    }
    moved["train"] = {"grad_accum": 1, **moved["train"]}  # the schema's default, written out, first
    path = built / "config.yaml"
    before = path.read_text()
    try:
        path.write_text(yaml.safe_dump(moved, sort_keys=False))
        result = snakemake(built, "-n")
    finally:
        path.write_text(before)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Nothing to be done" in result.stdout, result.stdout[-3000:]


def test_slurm_profile_dry_run_gives_every_job_its_declared_resources(tmp_path):
    result = snakemake(tmp_path, "-n", "--profile", str(ROOT / "profiles/slurm"), config=MICRO)
    assert result.returncode == 0, result.stderr[-2000:]
    # a grouped job's rule is indented under its group
    jobs = re.findall(r"^\s*rule (\w+):\n(.*?)(?=^\s*rule |^\S|\Z)", result.stdout, re.M | re.S)
    assert {rule for rule, _ in jobs} >= {"corpus", "train", "alignment", "lens", "fig1", "claims"}
    for rule, body in jobs:
        if rule == "all":
            continue
        resources = dict(re.findall(r"(\w+)=([^,\s]+)", re.search(r"resources: (.*)", body)[1]))
        assert "mem_mb" in resources and "runtime" in resources, rule
        if rule in ("train", "lens"):
            assert resources["gpu"] == "0"
    train = next(body for rule, body in jobs if rule == "train")
    assert "mem_mb=4000" in train and "runtime=120" in train


@pytest.mark.parametrize(
    "profile", [[], ["--profile", "profiles/slurm"], ["--profile", "profiles/slurm", "--workflow-profile", "none"]]
)
def test_profiles_replan_ready_jobs_every_10_s_not_every_second(monkeypatch, profile):
    """Snakemake re-plans all ready jobs once per max-jobs-per-timespan span (its default 100/1s); the slurm
    profile states the local profile's 100/10s, so it holds with or without the local one layered over it."""
    from snakemake.cli import parse_args

    monkeypatch.chdir(ROOT)
    args = parse_args(["-n", *profile])[1]
    assert (args.max_jobs_per_timespan.max_jobs, args.max_jobs_per_timespan.timespan) == (100, 10)


# --- Table 7 on the micro build's runs (tests/metrics/test_downstream.py has its parts) -----------------------------
@pytest.fixture(scope="module")
def table7_run(built, tmp_path_factory):
    """The micro config's Table 7 with WikiText-2 perplexity on a local text (and lm-eval on a local
    task when it is installed), built through snakemake offline on a copy of the micro build (its runs)."""
    workdir = copy_build(built, tmp_path_factory.mktemp("downstream"))
    (workdir / "wiki.txt").write_text(" = Heading = \n\n" + "The cat sat on the mat . " * 40)
    downstream = {
        "device": "cpu",
        "perplexity": {"label": "WikiText-2", "source": "local", "paths": [str(workdir / "wiki.txt")]},
    }
    if HAS_LM_EVAL:
        (workdir / "tasks").mkdir()
        write_task(workdir / "tasks")
        downstream["lm_eval"] = {"tasks": ["tiny_choice"], "batch_size": 4, "include_path": str(workdir / "tasks")}
    config = {**MICRO, "figures": {}, "tables": {"table7": ["main"]}, "downstream": downstream}
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
    result = snakemake(workdir, "results/tables/table7.md", config=config, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    return workdir


def test_micro_table7_shows_wikitext2_perplexity_beside_the_paper(table7_run):
    table = pd.read_csv(table7_run / "results/tables/table7.csv").set_index("variant")
    assert table.loc["tied", "WikiText-2 perplexity (paper)"] == 35.71
    assert table.loc["tied_x5", "WikiText-2 perplexity (paper)"] == 36.64
    frame = pd.read_parquet(table7_run / "results/metrics/perplexity/olmo/tied/seed0.parquet")
    assert frame.columns.tolist() == ["arch", "variant", "seed", "step", "metric", "value"]
    assert frame["step"].item() == 6 and frame["metric"].item() == "WikiText-2 perplexity"
    assert 1 < table.loc["tied", "WikiText-2 perplexity_mean"] == pytest.approx(frame["value"].item())
    assert (
        "| WikiText-2 perplexity | WikiText-2 perplexity (paper) |"
        in (table7_run / "results/tables/table7.md").read_text()
    )


@needs_lm_eval
def test_micro_table7_shows_the_lm_eval_accuracy_of_every_variant(table7_run):
    table = pd.read_csv(table7_run / "results/tables/table7.csv").set_index("variant")
    assert set(table.index) == {"tied", "untied", "tied_x5"}
    assert table["tiny_choice acc_mean"].between(0, 1).all()
    assert "tiny_choice acc" in (table7_run / "results/tables/table7.md").read_text()


# --- Damage still gets one line ------------------------------------------------------------------------
def test_a_truncated_checkpoint_read_by_a_sized_metric_is_one_line_naming_it_and_its_rebuild(built, tmp_path):
    copy_build(built, tmp_path)  # its checkpoints and metrics, built
    config = {**MICRO, "pairs": {"main": MICRO["pairs"]["main"]}, "figures": {}, "tables": {}}
    target = "results/metrics/alignment/main/seed0.parquet"
    first = snakemake(tmp_path, target, config=config)
    assert first.returncode == 0, first.stderr[-3000:]
    weights = tmp_path / pair_models(config, "main", 0)["tied"] / "model.safetensors"
    with open(weights, "r+b") as f:  # cut inside the header, which the memory request reads
        f.truncate(8 + int.from_bytes(f.read(8), "little") // 2)
    (tmp_path / target).unlink()
    again = snakemake(tmp_path, target, config=config)
    assert again.returncode != 0
    assert "InputFunctionException" not in again.stderr and "request_mb" not in again.stderr
    log = "".join(p.read_text() for p in (tmp_path / "logs/metrics/alignment").rglob("*.log"))
    lines = [line for line in (again.stderr + log).splitlines() if "model.safetensors" in line and "--force" in line]
    assert lines, again.stderr[-3000:]
    assert "snakemake --force" in lines[0] and "Traceback" not in log


@pytest.mark.parametrize("snakefile", ["Snakefile", "workflow/Snakefile"])
def test_the_workflow_used_as_a_module_plans_what_it_plans_on_its_own(tmp_path, snakefile):
    """`module tying: snakefile: ...; config: config; use rule * from tying`, as snakedeploy deploys it, from a
    folder of its own: config.yaml, schemas, scripts and captions found beside the module, not the user's
    Snakefile; the using workflow's config (here smoke.yaml) laid over config.yaml as an overlay."""
    user = tmp_path / "user"
    user.mkdir()
    (user / "Snakefile").write_text(
        f'configfile: "{ROOT / "configs/smoke.yaml"}"\n\n'
        f'module tying:\n    snakefile: "{ROOT / snakefile}"\n    config: config\n\n'
        "use rule * from tying\n"
    )
    used = cli(["-s", str(user / "Snakefile"), "-d", str(user), "-n", "--cores", "2", "all"])
    assert used.returncode == 0, (used.stdout + used.stderr)[-2000:]
    alone = cli(
        [
            "-s",
            str(ROOT / "Snakefile"),
            "-d",
            str(tmp_path),
            "-n",
            "--cores",
            "2",
            "all",
            "--configfile",
            str(ROOT / "configs/smoke.yaml"),
        ]
    )
    assert planned_jobs(used) == planned_jobs(alone) and planned_jobs(used)["train"] == 9

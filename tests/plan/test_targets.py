"""A target the config does not build ends, before any job, with one line naming the config key it needs, the
configs that build it and the command (tying.plan.targets); a path no config could build keeps snakemake's
own "No rule to produce". Dry runs only, in this process (snakerun.cli)."""

import re

import pytest
from snakerun import ROOT, cli

from tying.plan.layers import load
from tying.plan.targets import lacks, shipped_configs, targets, unbuilt_pattern

SMOKE = ROOT / "configs" / "smoke.yaml"
NOT_IN_SMOKE = [t for t in targets(load()) if t not in targets(load(SMOKE))]


def dry_run(tmp_path, target, *configfiles):
    """`snakemake -n TARGET --configfile FILE ...` (smoke's by default) in `tmp_path`: (exit status, every
    line it printed, the lines of ours)."""
    result = cli(
        [
            "-s",
            str(ROOT / "Snakefile"),
            "-d",
            str(tmp_path),
            "-n",
            target,
            "--configfile",
            *map(str, configfiles or [SMOKE]),
        ]
    )
    lines = (result.stdout + result.stderr).splitlines()
    return result.returncode, lines, [ln for ln in lines if ln.startswith("target error: ")]


def refused(tmp_path, target, *configfiles):
    """The one line a dry run of `target` ends with, checked to be ours alone: a non-zero exit, nothing that
    looks like a traceback, no job planned."""
    status, lines, ours = dry_run(tmp_path, target, *configfiles)
    text = "\n".join(lines)
    assert status != 0 and len(ours) == 1, text
    assert not any(word in text for word in ("Exception", "KeyError", "Traceback", "Job stats")), text
    assert ours[0].startswith(f"target error: {target} is not built by this config: it needs "), ours[0]
    return ours[0]


def test_the_default_config_has_figures_and_tables_the_smoke_config_leaves_out():
    assert "figures/fig6.pdf" in NOT_IN_SMOKE and "results/tables/table5.csv" in NOT_IN_SMOKE
    assert len(NOT_IN_SMOKE) == 24, NOT_IN_SMOKE  # Figures 2-9, Tables 1, 2, 5, 6, 7, claims by exposure, over training


@pytest.mark.parametrize("target", NOT_IN_SMOKE)
def test_a_figure_or_table_the_config_leaves_out_is_one_line_naming_its_key(tmp_path, target):
    line = refused(tmp_path, target)
    name = re.search(r"(fig\d|table\d|claims_\w+?)\.\w+$", target)[1]
    section = "figures" if name.startswith("fig") else "tables"
    assert f"it needs {section}: {{{name}: " in line, line
    # config.yaml builds every one of them, so the command is the default build's
    assert "config.yaml" in line and line.endswith(f": .venv/bin/snakemake --cores 2 {target}"), line


@pytest.mark.parametrize(
    "target,key,builder",
    [
        ("figures/scaling.pdf", "scaling: {sizes: ..., seeds: ...}", "configs/scaling.yaml"),
        ("results/tables/scaling_exposure.md", "scaling: {sizes: ..., seeds: ...}", "configs/scaling.yaml"),
        ("results/tables/c3_by_depth.csv", "scaling: {c3_by_depth: true}", "configs/depth.yaml"),
        ("figures/c3_by_width.pdf", "scaling: {c3_by_width: true}", "configs/width.yaml"),
        ("figures/survey.pdf", "survey: {comparisons: ...}", "configs/survey.yaml"),
    ],
)
def test_a_scaling_or_survey_target_without_its_section_is_one_line(tmp_path, target, key, builder):
    line = refused(tmp_path, target)
    assert f"it needs {key}; " in line and builder in line, line
    command = rf"build(s)? it: \.venv/bin/snakemake --cores 2 {re.escape(target)} --configfile configs/\S+\.yaml$"
    assert re.search(command, line), line


@pytest.mark.parametrize("target", ["results/tables/claims.md", "figures/claims.pdf", "figures/claims_by_exposure.pdf"])
def test_a_claims_target_whose_table_the_config_does_not_list_is_one_line(tmp_path, target):
    overlay = tmp_path / "no_claims.yaml"
    overlay.write_text("tables: {table1: [main]}\n")  # `tables` is replaced whole: smoke's claims are gone
    line = refused(tmp_path, target, SMOKE, overlay)
    assert "it needs tables: {claims" in line, line


def test_a_seed_the_config_does_not_have_is_one_line_naming_the_seeds(tmp_path):
    line = refused(tmp_path, "results/metrics/knn/main/seed9.parquet")
    assert "it needs seeds: [0, 1, 2, 9]; no config in configs/ or config.yaml builds it" in line, line
    line = refused(tmp_path, "results/metrics/lens/main/tied/seed4.parquet")  # the default config's five seeds
    assert "it needs seeds: [0, 1, 2, 4]; config.yaml" in line, line


def test_a_step_the_config_does_not_export_is_one_line_naming_the_checkpoints(tmp_path):
    target = "results/checkpoints/olmo/tied/seed0/step50"
    line = refused(tmp_path, target)
    assert "it needs train: {checkpoints: [0, 30, 50, 60]}; config.yaml" in line, line
    assert line.endswith(f": .venv/bin/snakemake --cores 2 {target}"), line


def test_a_pair_the_config_does_not_have_is_one_line_naming_the_pair(tmp_path):
    line = refused(tmp_path, "results/metrics/knn/family/seed0.parquet")
    assert "it needs pairs: {family: ...}; config.yaml" in line, line


def test_what_the_config_builds_still_plans_and_an_unknown_path_finds_no_rule(tmp_path):
    status, lines, ours = dry_run(tmp_path, "results/metrics/knn/main/seed2.parquet")
    assert status == 0 and not ours and "Job stats:" in lines, lines[-20:]
    status, lines, ours = dry_run(tmp_path, "figures/fig10.pdf")
    assert status != 0 and not ours, lines
    assert any(ln.startswith("No rule to produce figures/fig10.pdf") for ln in lines), lines


def paths(configs):
    """Pair and run paths over the pairs, architectures, variants and steps the `configs` name, with a pair and
    an architecture none names, a step none exports and seeds past theirs."""
    pairs = {p for c in configs for p in c["pairs"]} | {"nosuch"}
    archs = {a for c in configs for a in c["architectures"]} | {"nosuch"}
    variants = {v for c in configs for v in c["variants"]}
    steps = {s for c in configs for s in c["train"]["checkpoints"]} | {7}
    out = [f"results/metrics/knn/{p}/seed{s}.parquet" for p in pairs for s in range(6)]
    out += [f"results/lens/{p}/untied/seed{s}.safetensors" for p in pairs for s in (0, 3)]
    out += [
        f"results/checkpoints/{a}/{v}/seed{s}/step{t}" for a in archs for v in variants for s in (0, 4) for t in steps
    ]
    return out + [f"results/train/{a}/{v}/seed{s}/log.parquet" for a in archs for v in variants for s in range(6)]


def test_the_refusing_rule_matches_exactly_the_paths_a_config_lacks():
    """The wildcard constraint of the rule that answers a lacking path (unbuilt_pattern) must match no path the
    config builds, or that rule would stand beside the one that builds it."""
    configs = shipped_configs()
    candidates = paths(configs.values())
    for label, config in configs.items():
        pattern = re.compile(unbuilt_pattern(config))
        wrong = [p for p in candidates if bool(pattern.fullmatch(p)) != (lacks(config, p) is not None)]
        assert not wrong, (label, wrong[:5])
        assert any(lacks(config, p) for p in candidates) and any(lacks(config, p) is None for p in candidates)


def test_every_figure_and_table_of_every_config_is_one_lacks_knows():
    configs = shipped_configs()
    for label, config in configs.items():
        assert all(lacks(config, t) is None for t in targets(config)), label
        bare = {k: v for k, v in config.items() if k not in ("figures", "tables", "scaling", "survey", "lens_budget")}
        assert all(lacks(bare, t) for t in targets(config)), label

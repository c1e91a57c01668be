"""Pairs a target cannot use stop the config check with one line, before any job is planned."""

import copy
import os

import pytest
import yaml
from snakerun import ROOT, cli, snakemake

from tying.errors import PipelineError
from tying.plan.checks import check
from tying.plan.layers import load

SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
PAPER = load("configs/paper.yaml")
MICRO = yaml.safe_load((ROOT / "tests" / "micro.yaml").read_text())
UNTIED_ONLY = "olmo7b"  # configs/paper.yaml: an untied hub model and its revisions, for Figure 8
NO_TIED = f"pair {UNTIED_ONLY!r} has no tied model, and {{target}} compares tied with untied"
NO_EVOLUTION = "hub pair 'main' has no evolution (training step -> revision of its untied model)"


def paper_with(figures=None, tables=None, drop_evolution=False):
    config = copy.deepcopy(PAPER)
    config["figures"].update(figures or {})
    config["tables"].update(tables or {})
    if drop_evolution:
        del config["pairs"]["main"]["evolution"]
    return config


def test_the_shipped_configs_pass():
    for config in (PAPER, MICRO, yaml.safe_load((ROOT / "config.yaml").read_text())):
        check(copy.deepcopy(config), SCHEMA)


def test_the_check_puts_the_schemas_keys_in_its_order_and_keeps_the_users_names_in_theirs():
    config = copy.deepcopy(MICRO)
    config["model"] = dict(reversed(config["model"].items()))
    config["lens"] = dict(reversed(config["lens"].items()))
    config["variants"] = dict(reversed(config["variants"].items()))
    config["pairs"]["main"] = dict(reversed(config["pairs"]["main"].items()))
    check(config, SCHEMA)
    assert list(config["model"]) == ["hidden_size", "layers", "heads", "seq_len"]
    assert list(config["lens"])[:4] == ["steps", "whiten", "fisher", "train_dtype"]  # defaults in place
    assert list(config["variants"]) == ["tied_x5", "untied", "tied"]  # the user's names, the user's order
    assert list(config["pairs"]["main"])[:3] == ["tied", "untied", "scaled"]


@pytest.mark.parametrize(
    "config,message",
    [
        (paper_with(tables={"table1": ["main", UNTIED_ONLY]}), "tables.table1: " + NO_TIED.format(target="table1")),
        (paper_with(tables={"table5": [UNTIED_ONLY]}), "tables.table5: " + NO_TIED.format(target="table5")),
        (paper_with(tables={"claims": UNTIED_ONLY}), "tables.claims: " + NO_TIED.format(target="claims")),
        (paper_with(figures={"fig1": UNTIED_ONLY}), "figures.fig1: " + NO_TIED.format(target="fig1")),
        (paper_with(figures={"fig2": UNTIED_ONLY}), "figures.fig2: " + NO_TIED.format(target="fig2")),
        (paper_with(figures={"fig7": UNTIED_ONLY}), "figures.fig7: " + NO_TIED.format(target="fig7")),
        (paper_with(drop_evolution=True), "figures.fig3: " + NO_EVOLUTION),
        (
            paper_with(figures={"fig5": "main"}),
            "figures.fig5: pair 'main' is released models, and fig5 reads what only "
            "a pair the pipeline trains has (training logs, gradient provenance, token counts)",
        ),
        (
            paper_with(tables={"table2": "main"}),
            "tables.table2: pair 'main' is released models, and table2 reads what "
            "only a pair the pipeline trains has (training logs, gradient provenance, token counts)",
        ),
        (paper_with(figures={"fig3": "family"}), "figures.fig3: " + NO_EVOLUTION.replace("'main'", "'family'")),
        (paper_with(figures={"fig3": "olmo7b"}, drop_evolution=True), "tables.claims: " + NO_EVOLUTION),
    ],
)
def test_a_pair_missing_what_its_target_reads_is_one_line(config, message):
    with pytest.raises(PipelineError) as error:
        check(config, SCHEMA)
    assert str(error.value) == message


def test_a_trained_pair_needs_no_evolution_key_and_an_untied_only_pair_may_draw_evolution():
    config = copy.deepcopy(MICRO)
    config["pairs"]["untied_only"] = {"untied": {"arch": "olmo", "variant": "untied"}}
    config["figures"]["fig9"] = "untied_only"
    check(config, SCHEMA)
    config["tables"]["table1"] = ["untied_only"]
    with pytest.raises(PipelineError, match="tables.table1: pair 'untied_only' has no tied model"):
        check(config, SCHEMA)


def test_dry_run_of_a_hub_pair_without_evolution_stops_in_one_line(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "empty-cache")}
    result = snakemake(tmp_path, "-n", "all", config=paper_with(drop_evolution=True), env=env)
    assert result.returncode != 0
    lines = [ln for ln in result.stderr.splitlines() if not ln.startswith("Using workflow specific profile")]
    assert lines == [f"config error: figures.fig3: {NO_EVOLUTION}"]
    assert not (tmp_path / "results").exists()


def test_analysis_rows_defaults_to_the_tokenizers_and_takes_only_the_two_conventions():
    config = copy.deepcopy(MICRO)
    check(config, SCHEMA)
    assert config["analysis"]["rows"] == "tokenizer"
    config["analysis"]["rows"] = "padded"
    with pytest.raises(PipelineError, match=r"^analysis.rows: 'padded' is not one of \['tokenizer', 'matrix'\]$"):
        check(config, SCHEMA)


def _with_trained_control(**tables):
    config = copy.deepcopy(MICRO)
    config["pairs"]["ctl"] = {
        "tied": {"arch": "olmo", "variant": "untied"},
        "untied": {"arch": "olmo", "variant": "untied"},
        "control": "input",
    }
    config["tables"].update(tables)
    return config


def test_a_trained_negative_control_feeds_table1_table5_and_the_claims_after_the_first_pair():
    first = MICRO["tables"]["claims"]
    first = first if isinstance(first, str) else first[0]
    check(_with_trained_control(table1=["ctl"], table5=["ctl"], claims=[first, "ctl"]), SCHEMA)
    for tables, message in (
        (
            {"claims": ["ctl"]},
            "tables.claims: the first claims pair gets every claim; a negative control ('ctl') can only follow it",
        ),
        (
            {"table2": "ctl"},
            "tables.table2: pair 'ctl' is a negative control, read by claims, claims_by_exposure, "
            "claims_by_lookup, table1, table5 only",
        ),
    ):
        with pytest.raises(PipelineError) as error:
            check(_with_trained_control(**tables), SCHEMA)
        assert str(error.value) == message
    tied = _with_trained_control()
    tied["pairs"]["ctl"]["tied"]["variant"] = "tied"
    with pytest.raises(PipelineError, match=r"pairs.ctl.tied.variant: 'tied' is not untied \(a control's tied role"):
        check(tied, SCHEMA)


@pytest.mark.parametrize(
    "section,key,value,message",
    [
        ("lens", "steps", 0, "lens.steps: 0 is less than the minimum of 1"),
        (
            "analysis",
            "knn_k",
            300,
            "analysis.knn_k: 300 neighbours of each token, but pair 'main' has 300 tokens "
            "(tokenizer.vocab_size); give fewer",
        ),
    ],
)
def test_a_lens_without_steps_and_more_neighbours_than_tokens_end_at_the_check(tmp_path, section, key, value, message):
    config = copy.deepcopy(MICRO)
    config[section][key] = value
    with pytest.raises(PipelineError) as error:
        check(copy.deepcopy(config), SCHEMA)
    assert str(error.value) == message
    result = snakemake(tmp_path, "-n", "all", config=config)
    lines = [ln for ln in result.stderr.splitlines() if not ln.startswith("Using workflow specific profile")]
    assert result.returncode != 0 and lines == [f"config error: {message}"]
    config[section][key] = {"steps": 1, "knn_k": 299}[key]  # the largest and smallest values allowed
    check(config, SCHEMA)


SHAPES = "(keys: {arch, variant}, {path, tokenizer} or {hub, revision})"


@pytest.mark.parametrize(
    "reference,message",
    [
        ({"paht": "models/untied"}, f"unknown key 'paht' {SHAPES}"),
        ({"hub": "org/model", "revison": "abc"}, f"unknown key 'revison' {SHAPES}"),
        ({"path": "models/untied", "revision": "abc"}, f"'revision' is not a key of {{path, tokenizer}} {SHAPES}"),
        ({"arch": "olmo"}, f"{{arch}} is incomplete {SHAPES}"),
    ],
)
def test_a_misspelt_key_in_a_model_reference_is_named_and_only_what_the_user_wrote_is_shown(reference, message):
    config = copy.deepcopy(MICRO)
    config["pairs"]["main"]["untied"] = reference
    with pytest.raises(PipelineError) as error:
        check(config, SCHEMA)
    assert str(error.value) == f"pairs.main.untied: {message}"


def test_a_config_the_check_refuses_leaves_no_run_folder(tmp_path, monkeypatch):
    config = copy.deepcopy(MICRO) | {"workdir": "runs/refused"}
    config["pairs"]["main"]["untied"] = {"paht": "models/untied"}
    (tmp_path / "refused.yaml").write_text(yaml.safe_dump(config))
    monkeypatch.chdir(tmp_path)
    result = cli(
        [
            "-s",
            str(ROOT / "Snakefile"),
            "--cores",
            "1",
            "-n",
            "all",
            "--replace-workflow-config",
            "--configfile",
            "refused.yaml",
        ]
    )
    assert result.returncode == 1 and result.stderr.splitlines()[-1].startswith(
        "config error: pairs.main.untied: unknown key 'paht'"
    )
    assert not (tmp_path / "runs").exists()
    config["pairs"]["main"]["untied"] = {"arch": "olmo", "variant": "untied"}  # the same config, checked: its folder
    (tmp_path / "refused.yaml").write_text(yaml.safe_dump(config))
    assert (
        cli(
            [
                "-s",
                str(ROOT / "Snakefile"),
                "--cores",
                "1",
                "-n",
                "all",
                "--replace-workflow-config",
                "--configfile",
                "refused.yaml",
            ]
        ).returncode
        == 0
    )
    assert (tmp_path / "runs" / "refused").is_dir()

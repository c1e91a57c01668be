"""Step branches listed from the hub (list_repo_refs mocked) and written into a config's evolution; a config's
references pinned to commits (model_info and dataset_info mocked)."""

import datetime
import hashlib
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from huggingface_hub import GitRefInfo, GitRefs, HfApi
from huggingface_hub.errors import OfflineModeIsEnabled

from tying.errors import PipelineError
from tying.hub.revisions import main, pin_config, set_evolution, step_branches
from tying.plan.pins import unpinned_references

PAPER_CONFIG = Path(__file__).resolve().parents[2] / "configs" / "paper.yaml"
OLMO_BRANCHES = [
    "main",
    "step0-tokens0B",
    "step2000-tokens4B",
    "step30000-tokens62B",
    "step31000-tokens64B",
    "stage2-ingredient1",
]


@pytest.fixture
def branches(monkeypatch):
    """Make HfApi.list_repo_refs answer with the given branch names; returns a setter."""

    def set_branches(names):
        refs = GitRefs(
            branches=[GitRefInfo(name=n, ref=f"refs/heads/{n}", target_commit="0" * 40) for n in names],
            converts=[],
            tags=[],
        )
        monkeypatch.setattr(HfApi, "list_repo_refs", lambda self, repo_id, **kwargs: refs)

    return set_branches


def test_steps_map_to_the_branch_names_the_hub_lists(branches):
    branches(OLMO_BRANCHES)
    assert step_branches("allenai/OLMo-1B-0724-hf", [31000, 0]) == {0: "step0-tokens0B", 31000: "step31000-tokens64B"}
    assert step_branches("allenai/OLMo-1B-0724-hf") == {
        0: "step0-tokens0B",
        2000: "step2000-tokens4B",
        30000: "step30000-tokens62B",
        31000: "step31000-tokens64B",
    }
    branches(["main", "step1000", "step10000", "step100"])
    assert step_branches("EleutherAI/pythia-1b", [100, 1000]) == {100: "step100", 1000: "step1000"}


def test_a_step_without_a_branch_is_one_line(branches):
    branches(OLMO_BRANCHES)
    with pytest.raises(PipelineError) as error:
        step_branches("allenai/OLMo-1B-0724-hf", [0, 4000, 6000])
    assert str(error.value) == (
        "allenai/OLMo-1B-0724-hf has no branch for step 4000, 6000 (4 step branches, steps 0 to 31000)"
    )


def test_an_unreachable_hub_is_one_line(monkeypatch):
    def offline(self, repo_id, **kwargs):
        raise OfflineModeIsEnabled("offline")

    monkeypatch.setattr(HfApi, "list_repo_refs", offline)
    with pytest.raises(PipelineError) as error:
        step_branches("org/model")
    assert str(error.value) == "cannot list the branches of org/model: hub unreachable (offline?)"


def test_the_evolution_of_a_pair_is_rewritten_in_place(branches, tmp_path):
    config = tmp_path / "paper.yaml"
    shutil.copy(PAPER_CONFIG, config)
    branches(OLMO_BRANCHES)
    set_evolution(config, "main", step_branches("allenai/OLMo-1B-0724-hf", [0, 31000]))
    set_evolution(config, "pythia1b", {0: "step0", 1000: "step1000"})

    before, after = yaml.safe_load(PAPER_CONFIG.read_text()), yaml.safe_load(config.read_text())
    assert after["pairs"]["main"]["evolution"] == {0: "step0-tokens0B", 31000: "step31000-tokens64B"}
    assert after["pairs"]["pythia1b"]["evolution"] == {0: "step0", 1000: "step1000"}
    for pair in ("main", "pythia1b"):
        del before["pairs"][pair]["evolution"], after["pairs"][pair]["evolution"]
    assert after == before
    comments = [line for line in PAPER_CONFIG.read_text().splitlines() if line.lstrip().startswith("#")]
    assert comments and all(line in config.read_text().splitlines() for line in comments)


def test_a_pair_without_evolution_gets_one_after_its_untied_model(branches, tmp_path, capsys):
    config = tmp_path / "paper.yaml"
    shutil.copy(PAPER_CONFIG, config)
    branches(OLMO_BRANCHES)
    main(["allenai/OLMo-1B-0724-hf", "--steps", "0", "2000", "--config", str(config), "--pair", "family"])

    after = yaml.safe_load(config.read_text())
    assert after["pairs"]["family"] == {
        **yaml.safe_load(PAPER_CONFIG.read_text())["pairs"]["family"],
        "evolution": {0: "step0-tokens0B", 2000: "step2000-tokens4B"},
    }
    assert capsys.readouterr().out == "evolution:\n  0: step0-tokens0B\n  2000: step2000-tokens4B\n"


def test_a_missing_pair_is_one_line_and_leaves_the_config_alone(tmp_path):
    config = tmp_path / "paper.yaml"
    shutil.copy(PAPER_CONFIG, config)
    with pytest.raises(PipelineError, match=r"^pairs\.nope is missing or not a mapping$"):
        set_evolution(config, "nope", {0: "step0"})
    assert config.read_text() == PAPER_CONFIG.read_text()


PIN_CONFIG = """\
# A config to pin: comments on their own lines and beside references stay.
corpus:
  source: hf
  path: Salesforce/wikitext   # the lens text
  name: wikitext-103-raw-v1
pairs:
  main:
    tied: {hub: org/tied, revision: main}   # a tied model
    untied: {hub: org/untied}
  family:
    tied:
      hub: org/other
      revision: v1.0
    untied: {hub: org/untied, revision: %s}   # pinned already
  trained:
    tied: {arch: olmo, variant: tied}
    untied: {arch: olmo, variant: untied}
""" % ("a" * 40)


def fake_commit(repo_id, revision):
    return hashlib.sha1(f"{repo_id}@{revision}".encode()).hexdigest()


@pytest.fixture
def hub_commits(monkeypatch):
    """Make HfApi.model_info and dataset_info answer with fake_commit; returns the (kind, repo, revision) asked."""
    asked = []

    def info(kind):
        def answer(self, repo_id, revision=None, **kwargs):
            asked.append((kind, repo_id, revision))
            return SimpleNamespace(sha=fake_commit(repo_id, revision))

        return answer

    monkeypatch.setattr(HfApi, "model_info", info("model"))
    monkeypatch.setattr(HfApi, "dataset_info", info("dataset"))
    return asked


def test_pin_rewrites_every_branch_reference_as_its_commit_and_keeps_the_comments(hub_commits, tmp_path, capsys):
    config = tmp_path / "config.yaml"
    config.write_text(PIN_CONFIG)
    main(["pin", str(config)])

    after, today = yaml.safe_load(config.read_text()), datetime.date.today().isoformat()
    assert after["corpus"]["revision"] == fake_commit("Salesforce/wikitext", "main")
    assert after["pairs"]["main"] == {
        "tied": {"hub": "org/tied", "revision": fake_commit("org/tied", "main")},
        "untied": {"hub": "org/untied", "revision": fake_commit("org/untied", "main")},
    }
    assert after["pairs"]["family"]["tied"] == {"hub": "org/other", "revision": fake_commit("org/other", "v1.0")}
    assert after["pairs"]["family"]["untied"]["revision"] == "a" * 40
    assert after["pairs"]["trained"] == yaml.safe_load(PIN_CONFIG)["pairs"]["trained"]
    assert sorted(hub_commits) == [
        ("dataset", "Salesforce/wikitext", "main"),
        ("model", "org/other", "v1.0"),
        ("model", "org/tied", "main"),
        ("model", "org/untied", "main"),
    ]
    lines = config.read_text().splitlines()
    assert (
        f"    tied: {{hub: org/tied, revision: {fake_commit('org/tied', 'main')}}}   # a tied model; "
        f"pinned from main on {today}" in lines
    )
    assert f"  revision: {fake_commit('Salesforce/wikitext', 'main')}  # pinned from main on {today}" in lines
    assert f"      revision: {fake_commit('org/other', 'v1.0')}  # pinned from v1.0 on {today}" in lines
    comments = [line.split("#")[1] for line in PIN_CONFIG.splitlines() if "#" in line]
    assert len(comments) == 4 and all(any(c in line for line in lines) for c in comments)
    assert "pairs.main.tied: org/tied@main -> " + fake_commit("org/tied", "main") in capsys.readouterr().out

    pinned = config.read_text()
    hub_commits.clear()
    main(["pin", str(config)])
    assert config.read_text() == pinned and hub_commits == []
    assert capsys.readouterr().out.endswith(": 0 reference(s) pinned\n")


def test_pin_of_one_pair_leaves_the_other_references_alone(hub_commits, tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text(PIN_CONFIG)
    pins = pin_config(config, "family")
    assert pins == [("pairs.family.tied", "org/other", "v1.0", fake_commit("org/other", "v1.0"))]
    assert unpinned_references(yaml.safe_load(config.read_text())) == [
        "pairs.main.tied: org/tied@main",
        "pairs.main.untied: org/untied@main",
        "corpus: Salesforce/wikitext@main",
    ]


def test_pin_without_the_hub_is_one_line_and_leaves_the_config_alone(monkeypatch, tmp_path):
    def offline(self, repo_id, **kwargs):
        raise OfflineModeIsEnabled("offline")

    monkeypatch.setattr(HfApi, "model_info", offline)
    config = tmp_path / "config.yaml"
    config.write_text(PIN_CONFIG)
    with pytest.raises(SystemExit, match=r"^error: cannot resolve org/tied@main: hub unreachable \(offline\?\)$"):
        main(["pin", str(config), "--pair", "main"])
    assert config.read_text() == PIN_CONFIG


def test_unpinned_references_name_each_branch_reference_and_the_default_config_has_none():
    assert unpinned_references(yaml.safe_load(PIN_CONFIG)) == [
        "pairs.main.tied: org/tied@main",
        "pairs.main.untied: org/untied@main",
        "pairs.family.tied: org/other@v1.0",
        "corpus: Salesforce/wikitext@main",
    ]
    assert unpinned_references(yaml.safe_load((PAPER_CONFIG.parents[1] / "config.yaml").read_text())) == []

"""Step branches listed from the hub (list_repo_refs mocked) and written into a config's evolution."""
import shutil
from pathlib import Path

import pytest
import yaml
from huggingface_hub import GitRefInfo, GitRefs, HfApi
from huggingface_hub.errors import OfflineModeIsEnabled

from tying.errors import PipelineError
from tying.revisions import main, set_evolution, step_branches

PAPER_CONFIG = Path(__file__).resolve().parents[1] / "configs" / "paper.yaml"
OLMO_BRANCHES = ["main", "step0-tokens0B", "step2000-tokens4B", "step30000-tokens62B", "step31000-tokens64B",
                 "stage2-ingredient1"]


@pytest.fixture
def branches(monkeypatch):
    """Make HfApi.list_repo_refs answer with the given branch names; returns a setter."""
    def set_branches(names):
        refs = GitRefs(branches=[GitRefInfo(name=n, ref=f"refs/heads/{n}", target_commit="0" * 40) for n in names],
                       converts=[], tags=[])
        monkeypatch.setattr(HfApi, "list_repo_refs", lambda self, repo_id, **kwargs: refs)
    return set_branches


def test_steps_map_to_the_branch_names_the_hub_lists(branches):
    branches(OLMO_BRANCHES)
    assert step_branches("allenai/OLMo-1B-0724-hf", [31000, 0]) == {0: "step0-tokens0B", 31000: "step31000-tokens64B"}
    assert step_branches("allenai/OLMo-1B-0724-hf") == {0: "step0-tokens0B", 2000: "step2000-tokens4B",
                                                        30000: "step30000-tokens62B", 31000: "step31000-tokens64B"}
    branches(["main", "step1000", "step10000", "step100"])
    assert step_branches("EleutherAI/pythia-1b", [100, 1000]) == {100: "step100", 1000: "step1000"}


def test_a_step_without_a_branch_is_one_line(branches):
    branches(OLMO_BRANCHES)
    with pytest.raises(PipelineError) as error:
        step_branches("allenai/OLMo-1B-0724-hf", [0, 4000, 6000])
    assert str(error.value) == ("allenai/OLMo-1B-0724-hf has no branch for step 4000, 6000"
                                " (4 step branches, steps 0 to 31000)")


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
    assert after["pairs"]["family"] == {**yaml.safe_load(PAPER_CONFIG.read_text())["pairs"]["family"],
                                        "evolution": {0: "step0-tokens0B", 2000: "step2000-tokens4B"}}
    assert capsys.readouterr().out == "evolution:\n  0: step0-tokens0B\n  2000: step2000-tokens4B\n"


def test_a_missing_pair_is_one_line_and_leaves_the_config_alone(tmp_path):
    config = tmp_path / "paper.yaml"
    shutil.copy(PAPER_CONFIG, config)
    with pytest.raises(PipelineError, match=r"^pairs\.nope is missing or not a mapping$"):
        set_evolution(config, "nope", {0: "step0"})
    assert config.read_text() == PAPER_CONFIG.read_text()

"""C3 against depth (issue 48): a size's own steps in the scaling grid."""
import copy

import pytest

from tying.errors import PipelineError
from tying.plan import grid
from tying.plan.config import load

BASE = {
    "model": {"seq_len": 64},
    "train": {"batch_size": 16},
    "tokenizer": {"vocab_size": 1024},
    "variants": {"tied": {"tied": True}, "untied": {"tied": False}, "tied_x5": {"tied": True, "input_grad_scale": 5.0}},
    "scaling": {"head_dim": 24, "seeds": [0, 1, 2], "steps": [300, 1500],
                "sizes": [{"hidden_size": 48, "layers": 2}, {"hidden_size": 96, "layers": 3}]},
}


def _config(**scaling):
    config = copy.deepcopy(BASE)
    config["scaling"].update(scaling)
    return config


# --- The grid: a size's own steps -------------------------------------------------------------------------
def test_a_size_with_its_own_steps_crosses_those_in_place_of_the_shared_axis():
    sizes = [{"hidden_size": 96, "layers": 2, "steps": [9000]},
             {"hidden_size": 96, "layers": 12, "steps": [3000, 1000]}, {"hidden_size": 96, "layers": 3}]
    cells = grid.cells(_config(sizes=sizes, checkpoint_fractions=[0, 0.5, 1]))
    assert [c.name for c in cells] == ["d96_l2_s9000", "d96_l12_s1000", "d96_l12_s3000", "d96_l3_s300",
                                       "d96_l3_s1500"]
    assert [c.checkpoints for c in cells[:3]] == [(0, 4500, 9000), (0, 500, 1000), (0, 1500, 3000)]
    assert [c.tokens for c in cells[:2]] == [9000 * 16 * 64, 1000 * 16 * 64]
    assert grid.config_entries(cells)["architectures"]["d96_l12_s3000"]["train"] == {"steps": 3000,
                                                                                     "checkpoints": [0, 1500, 3000]}


def test_without_the_shared_axis_every_size_needs_its_own_steps():
    config = _config(sizes=[{"hidden_size": 96, "layers": 2, "steps": [900]}, {"hidden_size": 96, "layers": 3}])
    del config["scaling"]["steps"]
    with pytest.raises(PipelineError, match=r"^scaling.sizes.1: no steps; give scaling.steps or the size's own steps$"):
        grid.cells(config)
    config["scaling"]["sizes"][1]["steps"] = [600]
    assert [c.name for c in grid.cells(config)] == ["d96_l2_s900", "d96_l3_s600"]
    with pytest.raises(PipelineError, match=r"^scaling.sizes.0.steps: 0 is not a positive number of steps$"):
        grid.cells(_config(sizes=[{"hidden_size": 96, "layers": 2, "steps": [0]}]))


@pytest.mark.parametrize("path", ["configs/scaling.yaml", "configs/scaling-cluster.yaml", "configs/trained.yaml"])
def test_the_shipped_grids_cells_are_those_of_every_size_naming_the_shared_steps(path):
    config = load(path)
    moved = copy.deepcopy(config)
    for size in moved["scaling"]["sizes"]:
        size["steps"] = list(moved["scaling"]["steps"])
    del moved["scaling"]["steps"]
    assert grid.cells(moved) == grid.cells(config)


def test_the_cpu_grids_cells_are_unchanged():
    cells = grid.cells(load("configs/scaling.yaml"))
    assert [(c.name, c.checkpoints, c.lens_reference) for c in cells] == [
        ("d48_l2_s300", (0, 300), True), ("d48_l2_s1500", (0, 1500), False), ("d96_l3_s300", (0, 300), False),
        ("d96_l3_s1500", (0, 1500), False), ("d192_l5_s300", (0, 300), False)]


@pytest.mark.parametrize("scaling, message", [
    ({"lens": []}, "scaling.c3_by_depth: no cell has the tuned lens"),
    ({"lens": "all"}, "scaling.c3_by_depth: lens cells d48_l2_s300, d48_l2_s1500 share a depth of 2 layers"),
])
def test_c3_by_depth_needs_one_lens_cell_a_depth(scaling, message):
    with pytest.raises(PipelineError, match=message):
        grid.cells(_config(c3_by_depth=True, **scaling))
    assert grid.cells(_config(c3_by_depth=True, lens=["d48_l2_s300", "d96_l3_s1500"]))

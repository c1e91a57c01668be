"""C3 against depth (issue 48): a size's own steps in the scaling grid, the C3-by-depth table from the scaling
table and the lens metric, its figure, and the paper's Figure 2 curves it is drawn against."""

import copy
import math

import pandas as pd
import pytest

from tying import paper
from tying.claims import c3_by_depth
from tying.claims.definitions import ALL_TOKENS, CLAIMS
from tying.errors import PipelineError
from tying.plan import grid
from tying.plan.layers import load
from tying.report.figures.c3_by_depth import plot_c3_by_depth

BASE = {
    "model": {"seq_len": 64},
    "train": {"batch_size": 16},
    "tokenizer": {"vocab_size": 1024},
    "variants": {"tied": {"tied": True}, "untied": {"tied": False}, "tied_x5": {"tied": True, "input_grad_scale": 5.0}},
    "scaling": {
        "head_dim": 24,
        "seeds": [0, 1, 2],
        "steps": [300, 1500],
        "sizes": [{"hidden_size": 48, "layers": 2}, {"hidden_size": 96, "layers": 3}],
    },
}


def _config(**scaling):
    config = copy.deepcopy(BASE)
    config["scaling"].update(scaling)
    return config


# --- The grid: a size's own steps -------------------------------------------------------------------------
def test_a_size_with_its_own_steps_crosses_those_in_place_of_the_shared_axis():
    sizes = [
        {"hidden_size": 96, "layers": 2, "steps": [9000]},
        {"hidden_size": 96, "layers": 12, "steps": [3000, 1000]},
        {"hidden_size": 96, "layers": 3},
    ]
    cells = grid.cells(_config(sizes=sizes, checkpoint_fractions=[0, 0.5, 1]))
    assert [c.name for c in cells] == ["d96_l2_s9000", "d96_l12_s1000", "d96_l12_s3000", "d96_l3_s300", "d96_l3_s1500"]
    assert [c.checkpoints for c in cells[:3]] == [(0, 4500, 9000), (0, 500, 1000), (0, 1500, 3000)]
    assert [c.tokens for c in cells[:2]] == [9000 * 16 * 64, 1000 * 16 * 64]
    assert grid.config_entries(cells)["architectures"]["d96_l12_s3000"]["train"] == {
        "steps": 3000,
        "checkpoints": [0, 1500, 3000],
    }


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


def test_the_cpu_grid_crosses_each_size_with_the_shared_steps_axis():
    scaling = load("configs/scaling.yaml")["scaling"]
    cells = grid.cells(load("configs/scaling.yaml"))
    crossed = [grid.cell_name(s["hidden_size"], s["layers"], n) for s in scaling["sizes"] for n in scaling["steps"]]
    assert [c.name for c in cells] == [name for name in crossed if name not in scaling["exclude"]]
    fractions = scaling["checkpoint_fractions"]
    assert [c.checkpoints for c in cells] == [tuple(round(f * c.steps) for f in fractions) for c in cells]
    assert [c.name for c in cells if c.lens_reference] == scaling["lens_reference"]


@pytest.mark.parametrize(
    "scaling, message",
    [
        ({"lens": []}, "scaling.c3_by_depth: no cell has the tuned lens"),
        ({"lens": "all"}, "scaling.c3_by_depth: lens cells d48_l2_s300, d48_l2_s1500 share a depth of 2 layers"),
    ],
)
def test_c3_by_depth_needs_one_lens_cell_a_depth(scaling, message):
    with pytest.raises(PipelineError, match=message):
        grid.cells(_config(c3_by_depth=True, **scaling))
    assert grid.cells(_config(c3_by_depth=True, lens=["d48_l2_s300", "d96_l3_s1500"]))


def test_the_depth_config_trains_each_depth_tied_and_untied_on_its_own_steps_with_every_lens_check():
    config = load("configs/depth.yaml")
    cells, sizes = grid.cells(config), config["scaling"]["sizes"]
    assert [(c.hidden_size, c.layers, c.steps) for c in cells] == [
        (s["hidden_size"], s["layers"], n) for s in sizes for n in s["steps"]
    ]
    assert len({c.hidden_size for c in cells}) == 1 and len({c.layers for c in cells}) == len(cells)  # depth alone
    assert all(
        c.scaled == () and c.lens and c.lens_reference and c.seeds == tuple(config["scaling"]["seeds"]) for c in cells
    )
    assert [c.steps for c in cells] == sorted((c.steps for c in cells), reverse=True)  # deeper: fewer steps
    assert config["scaling"]["c3_by_depth"] and config["corpus"]["source"] == "docstrings"


# --- The table: the claims table's C3 per depth, and the gap at every state ---------------------------------
SEEDS = (0, 1, 2)
LAYERS = {"d96_l2_s900": 2, "d96_l3_s600": 3, "d96_l6_s300": 6}
T_HALF = 0.1 * 4.302652729749464 / math.sqrt(3)  # Student-t 95% half-width of (0.1, 0.2, 0.3)


def _lens():
    """Tuned-lens KL: untied (L - state) / 2 + seed / 100; tied that plus L / 10 + (seed + 1) / 10 before state L;
    0 at state L. So every state's gap is L / 10 + 0.2 on average, seeds 0.1 apart, and so is the early half's."""
    rows = []
    for cell, n in LAYERS.items():
        for seed in SEEDS:
            for state in range(n + 1):
                untied = (n - state) / 2 + seed / 100 if state < n else 0.0
                tied = untied + n / 10 + (seed + 1) / 10 if state < n else 0.0
                rows += [
                    {
                        "pair": cell,
                        "role": role,
                        "model": f"{cell}_{role}",
                        "seed": seed,
                        "layer": state,
                        "lens": lens,
                        "kl_bits": kl if lens == "tuned" else kl + 5,
                        "n_windows": 768,
                    }
                    for role, kl in (("tied", tied), ("untied", untied))
                    for lens in ("tuned", "logit")
                ]
    return pd.DataFrame(rows)


def _scaling(c3=None):
    """Scaling-table rows of each cell: LM (-0.8 - L / 100) and C3 (the lens's L / 10 + 0.2 unless `c3` says),
    deepest first, as a grid may list them."""
    rows = []
    for cell, n in reversed(LAYERS.items()):
        steps = int(cell.split("_s")[1])
        for claim, mean, verdict in (
            ("LM", -0.8 - n / 100, "holds"),
            ("C3", (c3 or {}).get(cell, n / 10 + 0.2), f"verdict of {n}"),
        ):
            rows.append(
                {
                    "cell": cell,
                    "hidden_size": 96,
                    "layers": n,
                    "steps": steps,
                    "claim": claim,
                    "token_set": ALL_TOKENS,
                    "mean": mean,
                    "ci_low": mean - 0.05 * n,
                    "ci_high": mean + 0.07,
                    "n_seeds": 3,
                    "verdict": verdict,
                }
            )
        rows.append(rows[-1] | {"token_set": "drawn >= 100", "mean": 9.0})  # a comparable-token row: not read
    return pd.DataFrame(rows)


def test_each_depths_early_half_row_is_its_claims_tables_c3_beside_the_lens_means():
    table = c3_by_depth.c3_by_depth(_scaling(), _lens())
    assert list(table.columns) == c3_by_depth.COLUMNS
    early = table[table["scope"] == c3_by_depth.EARLY].set_index("cell")
    assert list(early.index) == ["d96_l2_s900", "d96_l3_s600", "d96_l6_s300"]  # shallow to deep
    assert list(early["states"]) == ["0", "0-1", "0-2"]
    assert early["mean"].tolist() == pytest.approx([0.4, 0.5, 0.8])
    assert early["ci_low"].tolist() == pytest.approx([0.3, 0.35, 0.5]) and list(early["verdict"]) == [
        "verdict of 2",
        "verdict of 3",
        "verdict of 6",
    ]
    assert early["lm_nats"].tolist() == pytest.approx([-0.82, -0.83, -0.86])
    # 3 layers, states 0 and 1: untied (1.5 + 1.0) / 2 + the seeds' 0.01; tied 0.3 + 0.2 above that
    assert early.loc["d96_l3_s600", ["untied_bits", "tied_bits"]].tolist() == pytest.approx([1.26, 1.76])
    assert early.loc["d96_l3_s600", "ours"] == "0.500 [0.350, 0.570]"


def test_every_state_has_the_seeds_mean_gap_and_interval_at_state_over_depth():
    table = c3_by_depth.c3_by_depth(_scaling(), _lens())
    states = table[table["scope"] == c3_by_depth.STATE]
    six = states[states["cell"] == "d96_l6_s300"]
    assert six["state"].tolist() == list(range(7))
    assert six["fraction"].tolist() == [s / 6 for s in range(7)]
    assert six["mean"].iloc[:6].tolist() == pytest.approx([0.8] * 6)
    assert (six["ci_high"] - six["mean"]).iloc[:6].tolist() == pytest.approx([T_HALF] * 6)
    assert six["untied_bits"].tolist() == pytest.approx([3.01, 2.51, 2.01, 1.51, 1.01, 0.51, 0.0])
    last = six.iloc[-1]  # the model's own output: 0 bits for both
    assert (last["tied_bits"], last["mean"], last["fraction"]) == (0.0, 0.0, 1.0)
    assert set(states["verdict"]) == {""} and len(states) == 3 + 4 + 7
    # beside each state, Figure 2's gap at the same state index and at the same fraction of its 16 layers
    three = states[states["cell"] == "d96_l3_s600"].set_index("state")
    gap = [t - u for t, u in zip(paper.FIG2_KL["tied"], paper.FIG2_KL["untied"])]
    assert three["paper_same_state_bits"].tolist() == pytest.approx(gap[:4])
    # state 1 of 3 sits at 16 / 3 = 5.33 of the paper's states: a third of the way from its state 5 to its state 6
    assert three.loc[1, "paper_same_fraction_bits"] == pytest.approx(gap[5] + (gap[6] - gap[5]) / 3)
    assert three.loc[3, "paper_same_fraction_bits"] == pytest.approx(gap[16])  # the output of both
    assert table[table["scope"] == c3_by_depth.EARLY]["paper_same_state_bits"].isna().all()


def test_a_lens_metric_of_another_build_or_two_cells_of_one_depth_stop_in_one_line():
    with pytest.raises(
        PipelineError,
        match=r"^C3 by depth: cell d96_l3_s600's lens metric gives C3 0.500000 bits, "
        r"its claims table 0.510000; the two files are of different builds$",
    ):
        c3_by_depth.c3_by_depth(_scaling({"d96_l3_s600": 0.51}), _lens())
    twin = _scaling().replace({"d96_l2_s900": "d96_l2_s1800"})
    twin.loc[twin["cell"] == "d96_l2_s1800", "layers"] = 3
    with pytest.raises(PipelineError, match="do not each have their own depth"):
        c3_by_depth.c3_by_depth(twin, _lens())
    short = _lens().query("not (pair == 'd96_l6_s300' and layer == 6)")
    with pytest.raises(PipelineError, match="lens metric ends at state 5, not at its 6 layers"):
        c3_by_depth.c3_by_depth(_scaling(), short)


def test_the_markdown_gives_the_early_half_beside_the_paper_then_every_state(tmp_path):
    table = c3_by_depth.c3_by_depth(_scaling(), _lens())
    c3_by_depth.write_c3_by_depth(table, tmp_path / "c3.csv", tmp_path / "c3.md")
    md = (tmp_path / "c3.md").read_text()
    assert "| d96_l3_s600 | 3 | 600 | 0-1 | 1.760 | 1.260 | 0.500 [0.350, 0.570] | 3 | verdict of 3 | -0.830 |" in md
    assert "states 0-7: tied 5.66, untied 4.64, C3 +1.01 bits" in md
    assert "| d96_l6_s300 | 6 | 3 | 0.500 | 2.310 | 1.510 | 0.800 [" in md
    assert pd.read_csv(tmp_path / "c3.csv")["mean"].tolist() == pytest.approx(table["mean"].tolist())


def test_the_papers_figure_2_curves_give_its_c3():
    states, tied, untied, gap = c3_by_depth.paper_early()
    assert (states, round(tied, 2), round(untied, 2)) == ("0-7", 5.66, 4.64)
    assert gap == pytest.approx(CLAIMS["C3"].paper_value, abs=5e-4)
    assert (paper.FIG2_KL["tied"][0], paper.FIG2_KL["untied"][0]) == (8.86, 7.01)  # METHODS.md's input layer


# --- The figure: what it draws is the table's ----------------------------------------------------------------
def test_the_figure_plots_the_tables_c3_against_depth_and_each_depths_states_at_state_over_depth(tmp_path):
    table = c3_by_depth.c3_by_depth(_scaling(), _lens())
    path = tmp_path / "c3_by_depth.pdf"
    fig = plot_c3_by_depth(pd.read_csv(_written(table, tmp_path)), path)
    assert path.read_bytes().startswith(b"%PDF")
    c3_ax, *state_axes = [ax for ax in fig.axes if ax.get_visible() and ax.axison]
    early = table[table["scope"] == c3_by_depth.EARLY]
    ours = next(ln for ln in c3_ax.get_lines() if len(ln.get_xdata()) == 3)
    assert list(ours.get_xdata()) == [2, 3, 6] and list(ours.get_ydata()) == pytest.approx(early["mean"].tolist())
    star = next(ln for ln in c3_ax.get_lines() if ln.get_marker() == "*")
    assert (star.get_xdata()[0], star.get_ydata()[0]) == (16, pytest.approx(1.01375))
    assert {t.get_text().replace("\n", " ") for t in c3_ax.texts} >= {"verdict of 2", "verdict of 3", "verdict of 6"}
    assert len(state_axes) == 3
    six = state_axes[2]
    lines = [(list(ln.get_xdata()), list(ln.get_ydata())) for ln in six.get_lines()]
    states = table[(table["cell"] == "d96_l6_s300") & (table["scope"] == c3_by_depth.STATE)]
    assert (pytest.approx([s / 6 for s in range(7)]), pytest.approx(states["tied_bits"].tolist())) in lines
    assert (pytest.approx([s / 16 for s in range(17)]), list(paper.FIG2_KL["untied"])) in lines
    assert "6 layers, 300 steps: C3 +0.80" == six.get_title()


def _written(table, tmp_path):
    path = tmp_path / "c3_by_depth.csv"
    c3_by_depth.write_c3_by_depth(table, path, tmp_path / "c3_by_depth.md")
    return path

"""C3 by state against width (issue 63, item 5): the residual share, the grid's per-size learning rate and the
study's check, the width table from planted inputs, its page and figure, and configs/width.yaml."""

import copy
import re

import numpy as np
import pandas as pd
import pytest
import torch
import transformers as tf
import yaml
from snakerun import planned_jobs, snakemake

from tying.claims import c3_by_width as width
from tying.errors import PipelineError
from tying.lens.residual_share import residual_share, share_sums
from tying.lens.unembed import stacked_states, token_windows
from tying.plan import c3_by_width as plan
from tying.plan import grid
from tying.plan.config import prepared
from tying.plan.layers import load
from tying.plan.run_params import run_params
from tying.plan.size_free import size_free
from tying.report.figures.c3_by_width import plot_c3_by_width


# --- The residual share ------------------------------------------------------------------------------------------
def test_the_share_of_a_hand_built_residual_stream_is_its_hand_computed_ratios_and_cosines():
    # token 1: h0 (3, 0, 0); h1 adds (0, 4, 0), orthogonal to h0 (norm 5); h2 = 2 h0 + (0, 0, 8) (norm 10)
    # token 2: h0 (0, 2, 0); h1 = -h0; h2 = h0 / 2
    states = torch.tensor([[[3.0, 0, 0], [0, 2, 0]], [[3, 4, 0], [0, -2, 0]], [[6, 0, 8], [0, 1, 0]]])
    ratio, cosine = share_sums(states)
    assert (ratio / 2).tolist() == pytest.approx([1.0, (3 / 5 + 1) / 2, (3 / 10 + 2) / 2])
    assert (cosine / 2).tolist() == pytest.approx([1.0, (3 / 5 - 1) / 2, (6 / 10 + 1) / 2])


V, D, SEQ = 64, 32, 16


def _olmo(silent=False):
    """A tiny OLMo (no padding token, whose embedding row would be zero); `silent`: its blocks write nothing to the
    residual stream (attention and MLP outputs zero)."""
    torch.manual_seed(0)
    config = tf.OlmoConfig(
        vocab_size=V,
        hidden_size=D,
        num_hidden_layers=3,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=SEQ,
        pad_token_id=None,
    )
    model = tf.AutoModelForCausalLM.from_config(config).eval().requires_grad_(False)
    if silent:
        for block in model.model.layers:
            block.self_attn.o_proj.weight.zero_()
            block.mlp.down_proj.weight.zero_()
    return model


def test_a_model_whose_blocks_write_nothing_has_the_whole_stream_its_embedding_up_to_the_last_state():
    # every state, the last block's output before the final norm included, is h_0: ratio 1, cosine 1 (the final
    # norm's output would have another norm: ||h_0|| is far from sqrt(d) at OLMo's initialisation)
    tokens = np.random.default_rng(0).integers(0, V, 10 * SEQ).astype(np.uint16)
    frame = residual_share(_olmo(silent=True), tokens, seq_len=SEQ, batch_size=2, batches=2)
    assert frame["layer"].tolist() == [0, 1, 2, 3] and set(frame["n_tokens"]) == {4 * SEQ}
    assert frame["norm_ratio"].tolist() == pytest.approx([1.0] * 4, abs=1e-6)
    assert frame["cosine"].tolist() == pytest.approx([1.0] * 4, abs=1e-6)


def test_the_share_is_the_mean_over_every_token_of_the_scored_windows_taken_a_batch_at_a_time():
    model = _olmo()
    tokens = np.random.default_rng(1).integers(0, V, 10 * SEQ).astype(np.uint16)
    frame = residual_share(model, tokens, seq_len=SEQ, batch_size=2, batches=3)  # the first 6 of 10 windows
    states = stacked_states(model, token_windows(tokens, np.arange(0, 6 * SEQ, SEQ), SEQ, "cpu")).double()
    norms = states.norm(dim=-1)
    assert frame["norm_ratio"].tolist() == pytest.approx((norms[0] / norms).mean(-1).tolist(), rel=1e-6)
    assert frame["cosine"].tolist() == pytest.approx(
        ((states * states[0]).sum(-1) / (norms * norms[0])).mean(-1).tolist(), rel=1e-6
    )
    assert frame["norm_ratio"].iloc[1:].lt(1.5).all() and frame["cosine"].iloc[1:].lt(1).all()


# --- The grid: a size's own learning rate; the study's cells --------------------------------------------------------
BASE = {
    "model": {"seq_len": 64},
    "train": {"batch_size": 16, "lr": 0.004},
    "tokenizer": {"vocab_size": 1024},
    "variants": {"tied": {"tied": True}, "untied": {"tied": False}},
    "lens_budget": {"procedures": ["tuned_lens"]},
    "scaling": {
        "head_dim": 24,
        "seeds": [0, 1, 2],
        "steps": [300],
        "scaled": [],
        "c3_by_width": True,
        "sizes": [{"hidden_size": 48, "layers": 3, "lr": 0.0057}, {"hidden_size": 96, "layers": 3}],
    },
}


def _config(**scaling):
    config = copy.deepcopy(BASE)
    config["scaling"].update(scaling)
    return config


def test_a_sizes_own_learning_rate_is_its_cells_train_lr_and_reaches_its_runs():
    config = load("configs/width.yaml")
    sizes = config["scaling"]["sizes"]
    plain = sizes[1]
    plain.pop("lr")  # a size without its own lr trains at train.lr
    config = prepared(passed=config, replace=True).config
    cells = {(c.hidden_size, c.layers): c for c in grid.cells(config)}
    plain_cell = cells[plain["hidden_size"], plain["layers"]].name
    assert "lr" not in config["architectures"][plain_cell]["train"]
    assert run_params(config, plain_cell, "tied")["lr"] == config["train"]["lr"]
    own = [size for size in sizes if "lr" in size]
    assert any(size["lr"] != config["train"]["lr"] for size in own)  # else the two could not be told apart
    for size in own:
        cell = cells[size["hidden_size"], size["layers"]]
        train = {"steps": cell.steps, "checkpoints": list(cell.checkpoints), "lr": size["lr"]}
        assert config["architectures"][cell.name]["train"] == train
        assert [run_params(config, cell.name, v)["lr"] for v in ("tied", "untied")] == [size["lr"], size["lr"]]


@pytest.mark.parametrize(
    "scaling, message",
    [
        (
            {"lens": []},
            r"^scaling.c3_by_width: no cell has the tuned lens \(scaling.lens\), so there is no C3 to plot$",
        ),
        (
            {"sizes": [{"hidden_size": 96, "layers": 3}, {"hidden_size": 96, "layers": 6}]},
            r"^scaling.c3_by_width: lens cells d96_l3_s300, d96_l6_s300 share a width of 96; "
            r"give one lens cell a width \(scaling.lens\)$",
        ),
    ],
)
def test_c3_by_width_needs_one_lens_cell_a_width(scaling, message):
    with pytest.raises(PipelineError, match=message):
        grid.cells(_config(**scaling))
    two = _config(sizes=[{"hidden_size": 96, "layers": 3}, {"hidden_size": 96, "layers": 6}], lens=["d96_l3_s300"])
    assert [c.name for c in grid.cells(two) if c.lens] == ["d96_l3_s300"]


def test_the_study_sweeps_each_lens_cells_tied_and_untied_runs_at_their_final_step_and_needs_the_tuned_lens():
    config = _config(lens=["d96_l3_s300", "d48_l3_s300"])
    assert [c["cell"] for c in plan.width_cells(config)] == ["d48_l3_s300", "d96_l3_s300"]
    assert plan.width_runs(config)[:4] == [
        ("d48_l3_s300", "tied", 0, 300),
        ("d48_l3_s300", "tied", 1, 300),
        ("d48_l3_s300", "tied", 2, 300),
        ("d48_l3_s300", "untied", 0, 300),
    ]
    assert len(plan.width_runs(config)) == 2 * 2 * 3
    plan.check(config)
    config["lens_budget"]["procedures"] = ["logit", "certified"]
    with pytest.raises(
        PipelineError,
        match=r"^scaling.c3_by_width: reads the lens_budget sweeps' tuned_lens rows, "
        r"and lens_budget.procedures \['logit', 'certified'\] lacks tuned_lens$",
    ):
        plan.check(config)


# --- The table from planted inputs: two widths, two seeds --------------------------------------------------------
CELLS = [
    {"cell": "d96_l3_s600", "hidden_size": 96, "layers": 3, "steps": 600, "tied": "tied", "untied": "untied"},
    {"cell": "d48_l3_s900", "hidden_size": 48, "layers": 3, "steps": 900, "tied": "tied", "untied": "untied"},
]
SEEDS = (0, 1)
# Per lens, the gap at states 0, 1, 2 of the d48 cell; the d96 cell's is twice that. Each seed adds 0.1 x seed.
GAPS = {
    "logit": (1.0, 0.4, 0.2),
    "tuned_lens 250": (0.6, 0.3, 0.0),
    "tuned_lens 500": (0.5, 0.2, -0.1),
    "certified 1500": (0.3, 0.1, 0.05),
}
T_HALF = 12.706204736174707 * 0.05  # Student-t 95% half-width of two seeds 0.1 apart: t(0.975, 1) x 0.1 / 2
CERTIFIED = (1500, 1500 * 8 * 64)


def _kl(cell, lens, seed, state, role):
    """Untied: 3 - state + seed / 10; tied: that plus the planted gap; 0 at state 3 (the model's output)."""
    if state == 3:
        return 0.0
    untied = 3 - state + seed / 10
    factor = 2 if cell["hidden_size"] == 96 else 1
    return untied + (GAPS[lens][state] * factor + 0.1 * seed if role == "tied" else 0)


def _lens():
    rows = [
        {
            "pair": c["cell"],
            "role": role,
            "model": role,
            "seed": seed,
            "layer": state,
            "lens": name,
            "kl_bits": _kl(c, label, seed, state, role),
            "n_windows": 768,
        }
        for c in CELLS
        for role in ("tied", "untied")
        for seed in SEEDS
        for state in range(4)
        for name, label in (("logit", "logit"), ("tuned", "certified 1500"))
    ]
    return pd.DataFrame(rows)


def _sweeps():
    """tuned_lens rows at 250 and 500 steps; beside them rows the study does not read: the sweeps' certified
    procedure, another step's run, a run of another cell."""
    rows = []
    for c in CELLS:
        for variant in ("tied", "untied"):
            for seed in SEEDS:
                for state in range(4):
                    for steps in (250, 500):
                        kl = _kl(c, f"tuned_lens {steps}", seed, state, variant)
                        run = {
                            "arch": c["cell"],
                            "variant": variant,
                            "seed": seed,
                            "step": c["steps"],
                            "steps": steps,
                            "tokens": steps * 512,
                            "layer": state,
                            "floor_bits": 0.5,
                        }
                        rows += [
                            run | {"procedure": "tuned_lens", "kl_bits": kl},
                            run | {"procedure": "certified", "kl_bits": kl + 9},
                            run | {"procedure": "tuned_lens", "kl_bits": kl + 9, "step": 0},
                            run | {"procedure": "tuned_lens", "kl_bits": kl + 9, "arch": "d192_l3_s600"},
                        ]
    return pd.DataFrame(rows)


def _share():
    """norm_ratio 1 / (1 + state) (tied) or 1 / (1 + 2 state) (untied), plus seed / 10; cosine 1 - state / 10 (tied)
    or 1 - state / 5 (untied), minus seed / 100."""
    rows = [
        {
            "pair": c["cell"],
            "role": role,
            "model": role,
            "seed": seed,
            "layer": state,
            "norm_ratio": 1 / (1 + k * state) + seed / 10,
            "cosine": 1 - state / (10 / k) - seed / 100,
            "n_tokens": 49_152,
        }
        for c in CELLS
        for role, k in (("tied", 1), ("untied", 2))
        for seed in SEEDS
        for state in range(4)
    ]
    return pd.DataFrame(rows)


def _quality():
    """Margins at the final step: tied -0.9 - seed / 10, untied -1.0 + seed / 20 (d96: 0.1 lower); at step 0: +5."""
    rows = []
    for c in CELLS:
        shift = -0.1 if c["hidden_size"] == 96 else 0.0
        for seed in SEEDS:
            for role, margin in (("tied", -0.9 - seed / 10), ("untied", -1.0 + seed / 20)):
                rows += [
                    {
                        "pair": c["cell"],
                        "seed": seed,
                        "role": role,
                        "arch": c["cell"],
                        "variant": role,
                        "step": step,
                        "margin": value,
                    }
                    for step, value in ((0, 5.0), (c["steps"], margin + shift))
                ]
    return pd.DataFrame(rows)


def _table(**frames):
    inputs = {"lens": _lens(), "sweeps": _sweeps(), "share": _share(), "quality": _quality()} | frames
    return width.c3_by_width(CELLS, inputs["lens"], inputs["sweeps"], inputs["share"], inputs["quality"], CERTIFIED)


def test_each_widths_gap_at_every_state_under_every_lens_is_the_seeds_mean_with_its_student_t_interval():
    table = _table()
    assert list(table.columns) == width.COLUMNS
    assert list(dict.fromkeys(table["cell"])) == ["d48_l3_s900", "d96_l3_s600"]  # narrow to wide
    assert list(dict.fromkeys(table["lens"])) == ["logit", "tuned_lens 250", "tuned_lens 500", "certified 1500"]
    assert len(table) == 2 * 4 * 4 and set(table["n_seeds"]) == {2}
    row = table.set_index(["cell", "lens", "state"])
    # d96, tuned_lens 500, state 1: 2 x 0.2 + the seeds' mean 0.05
    assert row.loc[("d96_l3_s600", "tuned_lens 500", 1), ["mean", "ci_low", "ci_high"]].tolist() == pytest.approx(
        [0.45, 0.45 - T_HALF, 0.45 + T_HALF]
    )
    # d48, certified, state 0: 0.3 + 0.05; untied 3 + 0.05, tied 3.35 + 0.05
    assert row.loc[
        ("d48_l3_s900", "certified 1500", 0), ["mean", "untied_bits", "tied_bits"]
    ].tolist() == pytest.approx([0.35, 3.05, 3.4])
    for (cell, lens, state), r in row.iterrows():
        factor = 2 if cell.startswith("d96") else 1
        gap = GAPS[lens][state] * factor + 0.05 if state < 3 else 0.0
        half = T_HALF if state < 3 else 0.0
        assert (r["mean"], r["ci_low"], r["ci_high"]) == pytest.approx((gap, gap - half, gap + half)), (cell, state)
        assert r["fraction"] == state / 3
    tuned = table[table["procedure"] == "tuned_lens"]
    assert sorted(set(zip(tuned["lens_steps"], tuned["lens_tokens"]))) == [(250, 128_000), (500, 256_000)]
    assert set(table.loc[table["procedure"] == "certified", "lens_tokens"]) == {1500 * 512}


def test_each_state_carries_each_roles_residual_share_and_each_cell_its_models_margins():
    table = _table()
    d48 = table[(table["cell"] == "d48_l3_s900")].set_index(["lens", "state"])
    for lens in GAPS:  # the same on every lens's row
        assert d48.loc[lens, "tied_norm_ratio"].tolist() == pytest.approx(
            [1 + 0.05, 1 / 2 + 0.05, 1 / 3 + 0.05, 1 / 4 + 0.05]
        )
        assert d48.loc[lens, "untied_norm_ratio"].tolist() == pytest.approx([1.05, 1 / 3 + 0.05, 0.25, 1 / 7 + 0.05])
        assert d48.loc[lens, "tied_cosine"].tolist() == pytest.approx([0.995, 0.895, 0.795, 0.695])
        assert d48.loc[lens, "untied_cosine"].tolist() == pytest.approx([0.995, 0.795, 0.595, 0.395])
    margins = table.drop_duplicates("cell").set_index("cell")[["tied_lm_nats", "untied_lm_nats", "worst_lm_nats"]]
    assert margins.loc["d48_l3_s900"].tolist() == pytest.approx([-0.95, -0.975, -0.9])  # worst: tied seed 0
    assert margins.loc["d96_l3_s600"].tolist() == pytest.approx([-1.05, -1.075, -1.0])


def test_a_missing_run_or_sweep_stops_in_one_line_naming_the_cell_and_source():
    sweeps = _sweeps()
    short = sweeps[~((sweeps["arch"] == "d96_l3_s600") & (sweeps["variant"] == "untied") & (sweeps["seed"] == 1))]
    with pytest.raises(
        PipelineError,
        match=r"^C3 by width: cell d96_l3_s600's tuned_lens 250 lens of the untied run "
        r"of seed 1 has none, not states 0-3 once$",
    ):
        _table(sweeps=short)
    with pytest.raises(PipelineError, match="cell d48_l3_s900 has no tuned_lens sweep rows at step 900"):
        _table(sweeps=sweeps[sweeps["procedure"] != "tuned_lens"])
    share = _share()
    with pytest.raises(
        PipelineError,
        match="cell d48_l3_s900's residual share of the tied run of seed 0 has states "
        r"\[0, 1, 2\], not states 0-3 once",
    ):
        _table(
            share=share.drop(
                share.index[
                    (share["pair"] == "d48_l3_s900")
                    & (share["layer"] == 3)
                    & (share["seed"] == 0)
                    & (share["role"] == "tied")
                ]
            )
        )
    with pytest.raises(PipelineError, match="has seeds \\[2\\] its lens metric lacks"):
        _table(share=pd.concat([share, share[share["seed"] == 1].assign(seed=2)]))


def test_the_page_gives_the_margins_then_each_state_beside_the_papers_gaps(tmp_path):
    table = _table()
    width.write_c3_by_width(table, tmp_path / "c3.csv", tmp_path / "c3.md")
    md = (tmp_path / "c3.md").read_text()
    assert "| d48_l3_s900 | 48 | 3 | 900 | 2 | -0.950 | -0.975 | -0.900 |" in md
    assert (
        f"| d96_l3_s600 | 1 | 0.333 | 2.900 | 2.050 | 0.850 [{0.85 - T_HALF:.3f}, {0.85 + T_HALF:.3f}] | "
        f"0.650 [{0.65 - T_HALF:.3f}, {0.65 + T_HALF:.3f}] | 0.450 ["
    ) in md
    assert (
        "tuned_lens 250: 250 steps of 512 tokens; tuned_lens 500: 500 steps of 512 tokens; certified 1500: "
        "1,500 steps of 512 tokens" in md
    )
    assert "16 layers), gap by state (bits, Figure 2's tuned lens): 0 +1.85, 1 +2.97, 2 +1.58, 3 +0.70" in md
    assert pd.read_csv(tmp_path / "c3.csv")["mean"].tolist() == pytest.approx(table["mean"].tolist())


def test_the_figure_draws_the_tables_gaps_per_lens_and_the_residual_share(tmp_path):
    table = _table()
    width.write_c3_by_width(table, tmp_path / "c3.csv", tmp_path / "c3.md")
    fig = plot_c3_by_width(pd.read_csv(tmp_path / "c3.csv"), tmp_path / "c3.pdf")
    assert (tmp_path / "c3.pdf").read_bytes().startswith(b"%PDF")
    top, bottom = fig.axes[:3], fig.axes[3:]
    assert [ax.get_title() for ax in top] == ["gap, tuned_lens 250", "gap, tuned_lens 500", "gap, certified 1500"]
    lines = [list(ln.get_ydata()) for ln in top[1].get_lines() if len(ln.get_xdata()) == 4]
    for cell in ("d48_l3_s900", "d96_l3_s600"):
        own = table[(table["cell"] == cell) & (table["lens"] == "tuned_lens 500")]
        assert pytest.approx(own["mean"].tolist()) in lines
    ratio = [list(ln.get_ydata()) for ln in bottom[0].get_lines()]
    d96 = table[(table["cell"] == "d96_l3_s600") & (table["lens"] == "logit")]
    assert pytest.approx(d96["untied_norm_ratio"].tolist()) in ratio and len(ratio) == 4
    assert bottom[2].get_title() == "gap, logit lens"


# --- configs/width.yaml -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", ["configs/width.yaml", "configs/width-384.yaml"])
def test_the_width_config_trains_each_width_at_three_layers_tied_and_untied_with_every_lens_check(path):
    config = prepared(path).config
    cells, head_dim = grid.cells(config), config["scaling"]["head_dim"]
    assert [c.hidden_size for c in cells] == sorted({s["hidden_size"] for s in config["scaling"]["sizes"]})
    assert {c.layers for c in cells} == {3}
    assert all(c.heads == c.hidden_size // head_dim and c.intermediate_size == 4 * c.hidden_size for c in cells)
    assert all(
        c.scaled == () and c.lens and c.lens_reference and c.seeds == tuple(config["scaling"]["seeds"]) for c in cells
    )
    assert config["scaling"]["c3_by_width"] and config["corpus"]["source"] == "docstrings"
    assert config["lens_budget"]["procedures"] == ["tuned_lens"]


@pytest.mark.parametrize("path", ["configs/width.yaml", "configs/width-384.yaml"])
def test_the_width_config_moves_width_alone_and_its_d96_runs_are_the_trained_configs(path):
    config = prepared(path).config
    numbers = [size_free(config, pair=c.name) for c in grid.cells(config)]
    for key, tolerance in (("relative_update", 2e-4), ("update_budget", 0.01), ("total_decay", 1e-9)):
        assert max(n[key] for n in numbers) - min(n[key] for n in numbers) <= tolerance, key
    assert {n["warmup_fraction"] for n in numbers} == {0.05}
    trained = prepared("configs/trained.yaml").config
    for variant in ("tied", "untied"):
        assert run_params(config, "d96_l3_s6000", variant) == run_params(trained, "d96_l3_s6000", variant)


def test_the_d384_rung_adds_one_cell_to_the_ladder_and_keeps_every_other_run():
    ladder, extended = prepared("configs/width.yaml").config, prepared("configs/width-384.yaml").config
    assert [c.name for c in grid.cells(extended)] == [c.name for c in grid.cells(ladder)] + ["d384_l3_s6000"]
    for cell in grid.cells(ladder):
        for variant in ("tied", "untied"):
            assert run_params(extended, cell.name, variant) == run_params(ladder, cell.name, variant)


def test_the_width_config_plans_every_run_its_lenses_sweeps_shares_and_the_study(tmp_path):
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(load("configs/width.yaml")))
    result = snakemake(tmp_path, "-n")
    assert result.returncode == 0, result.stderr[-2000:]
    jobs = planned_jobs(result)
    scaling = load("configs/width.yaml")["scaling"]
    widths, seeds = len(scaling["sizes"]), len(scaling["seeds"])
    runs = widths * 2 * seeds  # tied and untied
    trains = sum(n for rule, n in jobs.items() if rule.startswith("train"))  # one train rule a checkpoint schedule
    assert trains == jobs["lens"] == jobs["lens_budget"] == jobs["residual_share"] == runs
    assert (
        jobs["lens_convergence"] == widths * 2 and jobs["cell_claims"] == widths and jobs["quality"] == widths * seeds
    )
    assert jobs["c3_by_width_table"] == jobs["c3_by_width_figure"] == 1
    assert not {"lens_budget_table", "c3_by_depth_table", "scaling"} & set(jobs)
    swept = set(re.findall(r"wildcards: arch=(\w+), variant=(\w+), seed=(\d+), step=(\d+)", result.stdout))
    assert swept == {
        (cell, variant, str(seed), str(step))
        for cell, variant, seed, step in plan.width_runs(load("configs/width.yaml"))
    }

"""C3 against the lens's budget: the procedures, the zero-step lens, the state-0 floor, the table, the plan."""

import math

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from snakerun import planned_jobs, snakemake
from test_lens import SEQ, V, markov_tokens, tiny_model

from tying import paper
from tying.claims.lens_budget import (
    c3_by_state,
    length_sentence,
    lens_budget_markdown,
    lens_budget_table,
    states_by_lens,
)
from tying.errors import PipelineError
from tying.lens.fitting import backward_lens, train_lens
from tying.lens.floor import readout_floor, state0_floor, state0_floors, token_means
from tying.lens.lens_budget import sweep_lenses
from tying.lens.procedures import procedure_recipe
from tying.lens.scoring import evaluate_lens
from tying.lens.translators import TunedLens
from tying.lens.unembed import Readout, stacked_states, token_windows
from tying.plan import lens_budget
from tying.plan.config import prepared
from tying.plan.layers import load
from tying.plan.runs import schedule
from tying.report.figures.lens_budget import plot_lens_budget
from tying.stats import mean_ci

ROOT = lens_budget.__file__.rsplit("/src/", 1)[0]


def lens_cfg(**overrides):
    """The config's `lens:` section on 16-token windows."""
    with open(f"{ROOT}/config.yaml") as f:
        cfg = yaml.safe_load(f)["lens"]
    return {**cfg, "seq_len": SEQ, "batch_size": 8, "eval_batches": 2, "train_dtype": "float32", **overrides}


# --- The procedures ------------------------------------------------------------------------------------------
def test_the_tuned_lens_recipe_is_the_packages_train_defaults():
    """tuned-lens 0.2's `train` (scripts/ingredients.py Optimizer, scripts/train_loop.py Train): SGD, Nesterov,
    lr 1.0 momentum-corrected, momentum 0.9, weight decay 1e-3, linear decay to 0 with no warmup, the gradient's
    norm clipped at 1.0, plain coordinates; the budget is the sweep's."""
    recipe = procedure_recipe("tuned_lens", lens_cfg(), 500)
    assert {
        k: recipe[k]
        for k in ("optimizer", "lr", "momentum", "weight_decay", "grad_clip", "schedule", "whiten", "fisher", "steps")
    } == {
        "optimizer": "sgd",
        "lr": 1.0,
        "momentum": 0.9,
        "weight_decay": 1e-3,
        "grad_clip": 1.0,
        "schedule": "linear",
        "whiten": False,
        "fisher": False,
        "steps": 500,
    }
    certified = procedure_recipe("certified", lens_cfg(), 500)
    assert certified["optimizer"] == "adam" and certified["whiten"] and certified["schedule"] == "restart"
    with pytest.raises(PipelineError, match="unknown lens procedure 'lion'"):
        procedure_recipe("lion", lens_cfg(), 10)


def test_the_tuned_lens_recipe_trains_as_a_hand_written_loop_of_the_packages_steps():
    """Three steps of train_lens under the recipe equal torch's SGD (Nesterov, lr 1.0 x (1 - 0.9), weight decay
    1e-3) on the clipped gradient with the learning rate 1, 2/3, 1/3 of the peak: the linear schedule."""
    model, tokens = tiny_model("olmo", initializer_range=0.3), markov_tokens(4_000, 1)
    recipe = {
        k: v for k, v in procedure_recipe("tuned_lens", lens_cfg(batch_size=4), 3).items() if k not in ("train_dtype",)
    }
    ours = train_lens(model, tokens, **recipe, seed=0)
    lens, readout = TunedLens(2, model.config.hidden_size), Readout(model)
    opt = torch.optim.SGD(lens.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-3)
    rng = np.random.default_rng(0)
    for factor in (1, 2 / 3, 1 / 3):
        starts = rng.integers(0, len(tokens) - SEQ + 1, size=4)
        opt.zero_grad()
        backward_lens(lens, readout, stacked_states(model, token_windows(tokens, starts, SEQ, "cpu")))
        torch.nn.utils.clip_grad_norm_(lens.parameters(), 1.0)
        opt.param_groups[0]["lr"] = 0.1 * factor
        opt.step()
    torch.testing.assert_close(ours.weight, lens.weight.detach())
    torch.testing.assert_close(ours.bias, lens.bias.detach())


@pytest.mark.parametrize("procedure", ["tuned_lens", "certified"])
def test_a_zero_step_lens_is_the_logit_lens(procedure):
    model, val = tiny_model("olmo", initializer_range=0.3), markov_tokens(2_000, 2)
    cfg = lens_cfg()
    logit = evaluate_lens(model, TunedLens(2, model.config.hidden_size), val, seq_len=SEQ, batch_size=8, batches=2)
    logit = logit[logit["lens"] == "logit"].set_index("layer")["kl_bits"]
    sweep = sweep_lenses(model, markov_tokens(4_000, 1), val, cfg, ["logit", procedure], [0], seed=0)
    for name in ("logit", procedure):
        kl = sweep[sweep["procedure"] == name].set_index("layer")["kl_bits"]
        np.testing.assert_allclose(kl, logit, atol=1e-6)
    assert logit.iloc[0] > 0.1  # a logit lens with something to learn


# --- The floor at state 0 ------------------------------------------------------------------------------------
def output_by_token(model, tokens, batches=2, batch_size=8):
    """The model's output distributions on the scored windows, and each position's token: (N, V), (N,)."""
    ids = torch.from_numpy(np.asarray(tokens[: batches * batch_size * SEQ], dtype=np.int64)).view(-1, SEQ)
    with torch.no_grad():
        p = model(input_ids=ids).logits.softmax(-1).reshape(-1, V).double().numpy()
    return p, ids.reshape(-1).numpy()


def test_the_floor_is_the_kl_to_the_mean_output_given_the_current_token():
    """Computed here the long way: group the positions by token, average their distributions, KL to that mean."""
    model, val = tiny_model("olmo", initializer_range=0.3), markov_tokens(2_000, 2)
    p, ids = output_by_token(model, val)
    mean = {v: p[ids == v].mean(0) for v in np.unique(ids)}
    expected = np.mean([np.sum(p[i] * (np.log(p[i]) - np.log(mean[ids[i]]))) for i in range(len(ids))]) / math.log(2)
    assert state0_floor(model, val, seq_len=SEQ, batch_size=8, batches=2) == pytest.approx(expected, abs=1e-6)
    assert expected > 0.05  # the output depends on more than the current token


def test_a_model_whose_output_depends_on_the_current_token_alone_has_its_lens_kl_at_state_0_as_floor():
    """Blocks that add nothing: every state is the embedding state, the logit lens there is the output itself,
    and the floor (the output against its mean given the token) is that lens's KL, 0."""
    model, val = tiny_model("olmo", initializer_range=0.3), markov_tokens(2_000, 2)
    for layer in model.model.layers:
        layer.self_attn.o_proj.weight.zero_()
        layer.mlp.down_proj.weight.zero_()
    kl = evaluate_lens(model, TunedLens(2, model.config.hidden_size), val, seq_len=SEQ, batch_size=8, batches=2)
    state0 = kl[(kl["lens"] == "logit") & (kl["layer"] == 0)]["kl_bits"].item()
    assert state0_floor(model, val, seq_len=SEQ, batch_size=8, batches=2) == pytest.approx(state0, abs=1e-6)


def test_no_lens_at_state_0_beats_the_floor_and_the_readouts_floor_above_it():
    model, train, val = tiny_model("olmo", initializer_range=0.3), markov_tokens(20_000, 1), markov_tokens(2_000, 2)
    sweep = sweep_lenses(model, train, val, lens_cfg(), ["logit", "certified"], [60], seed=0)
    state0 = sweep[sweep["layer"] == 0].set_index("procedure")
    floor, readout = state0["floor_bits"].iloc[0], state0["readout_floor_bits"].iloc[0]
    assert 0 < floor < floor + readout < state0.loc["certified", "kl_bits"] < state0.loc["logit", "kl_bits"]
    assert readout > 0.01  # this readout cannot express every token's mean output


# --- The readout floor: planted readouts whose optimum is known --------------------------------------------
def planted_readout(weight, norm=None, scale=1.0):
    """A Readout of a given unembedding (V, d), no bias, final norm (None: none) and logit scale, no soft cap."""
    readout = Readout.__new__(Readout)
    readout.norm, readout.weight, readout.bias = norm or torch.nn.Identity(), torch.tensor(weight), None
    readout.scale, readout.softcap = scale, None
    return readout


def bits(p, q):
    return sum(a * math.log(a / b) for a, b in zip(p, q)) / math.log(2)


def test_a_readout_that_reaches_every_mean_output_has_a_readout_floor_of_zero():
    """An identity unembedding and no norm: z = log pbar_v (over the logit scale) reads out pbar_v itself."""
    pbar = torch.tensor([[0.2, 0.5, 0.3], [0.1, 0.1, 0.8]], dtype=torch.float64)
    for scale in (1.0, 0.25):
        floor = readout_floor(
            planted_readout([[1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0]], scale=scale), pbar, torch.ones(2).double()
        )
        assert floor == pytest.approx(0, abs=1e-6)


def test_the_readout_floor_of_a_one_dimensional_readout_is_its_hand_computed_optimum_weighted_by_token_counts():
    """Logits (z, 0, -z): q = (y, 1, 1/y) / (y + 1 + 1/y) with y = e^z. For pbar = (0.6, 0.3, 0.1) the KL's
    derivative vanishes where (y - 1/y) / (y + 1 + 1/y) = 0.6 - 0.1, y^2 - y - 3 = 0; the search starts at the
    least-squares z = ln(0.6 / 0.1) / 2 = 0.896, not the optimum ln y = 0.834. pbar = (1/3, 1/3, 1/3) is
    reached at z = 0. Counts 1 and 3 weight them."""
    y = (1 + math.sqrt(13)) / 2
    target = (0.6, 0.3, 0.1)
    optimum = bits(target, [v / (y + 1 + 1 / y) for v in (y, 1, 1 / y)])
    pbar = torch.tensor([target, [1 / 3] * 3], dtype=torch.float64)
    floor = readout_floor(planted_readout([[1.0], [0.0], [-1.0]]), pbar, torch.tensor([1.0, 3.0]).double())
    assert floor == pytest.approx(optimum / 4, abs=1e-6)
    assert optimum > 0.004  # not reachable: (0.6, 0.3, 0.1) is no (y, 1, 1/y)


def test_the_readout_floor_reads_through_the_final_norm():
    """An RMS norm without weights puts the readout's input on the circle |u| = sqrt(2): the logits' difference
    u1 - u2 is at most 2, so pbar = (0.99, 0.01), which needs ln 99 = 4.6, is best read as (sigmoid 2, 1 - sigmoid 2);
    without the norm it would be reached exactly."""
    best = 1 / (1 + math.exp(-2))
    pbar = torch.tensor([[0.99, 0.01]], dtype=torch.float64)
    norm = torch.nn.RMSNorm(2, eps=1e-12, elementwise_affine=False)
    floor = readout_floor(planted_readout([[1.0, 0], [0, 1.0]], norm), pbar, torch.ones(1).double())
    assert floor == pytest.approx(bits((0.99, 0.01), (best, 1 - best)), abs=1e-6)
    no_norm = readout_floor(planted_readout([[1.0, 0], [0, 1.0]]), pbar, torch.ones(1).double())
    assert no_norm == pytest.approx(0, abs=1e-6)


def test_the_floors_of_a_model_are_its_token_means_and_the_readouts_search_on_them():
    model, val = tiny_model("olmo", initializer_range=0.3), markov_tokens(2_000, 2)
    pbar, counts, floor = token_means(model, val, seq_len=SEQ, batch_size=8, batches=2)
    assert counts.sum() == 2 * 8 * SEQ and torch.allclose(pbar.sum(-1), torch.ones(len(pbar)).double())
    floors = state0_floors(model, Readout(model), val, seq_len=SEQ, batch_size=8, batches=2)
    searched = readout_floor(Readout(model), pbar, counts)
    assert floors == pytest.approx({"floor_bits": floor, "readout_floor_bits": searched})


# --- The table -----------------------------------------------------------------------------------------------
def planted_sweeps(seeds=(0, 1, 2)):
    """Two-block runs (early state: 0). Tied state-0 KL 1 + steps^-1/2 x 4 + seed / 10, untied 1 + seed / 20, state 1
    0.5 for both, floors 0.3 (tied) and 0.2 (untied), readout floors 0.05 and 0.04; a second tied seed `seed + 1`
    for the null pair; the tuned-lens lenses at 8 windows a step (100 steps: also at 64, 0.01 bits lower for both)."""
    rows = []
    for variant in ("tied", "untied"):
        for seed in [*seeds, max(seeds) + 1]:
            for procedure, batch, steps in (
                ("logit", 8, 0),
                ("tuned_lens", 8, 4),
                ("tuned_lens", 8, 100),
                ("tuned_lens", 64, 100),
            ):
                early = 1 + seed / 20 if variant == "untied" else 1 + 4 / math.sqrt(max(steps, 1)) + seed / 10
                for layer, kl in ((0, early), (1, 0.5), (2, 0.0)):
                    rows.append(
                        {
                            "arch": "olmo",
                            "variant": variant,
                            "seed": seed,
                            "step": 10,
                            "procedure": procedure,
                            "batch_size": batch,
                            "tokens_per_step": batch * 64,
                            "steps": steps,
                            "tokens": steps * batch * 64,
                            "layer": layer,
                            "kl_bits": kl - 0.01 * (batch == 64 and layer < 2),
                            "floor_bits": 0.3 if variant == "tied" else 0.2,
                            "readout_floor_bits": 0.05 if variant == "tied" else 0.04,
                        }
                    )
    return pd.DataFrame(rows)


def planted_comparisons(seeds=(0, 1, 2)):
    return [
        {"comparison": "tying", "seed": s, "a": ("olmo", "tied", s, 10), "b": ("olmo", "untied", s, 10)} for s in seeds
    ] + [
        {"comparison": "tied_seeds", "seed": s, "a": ("olmo", "tied", s, 10), "b": ("olmo", "tied", s + 1, 10)}
        for s in seeds
    ]


def test_lens_budget_table_is_each_seeds_early_gap_with_a_student_t_interval_over_seeds():
    table = lens_budget_table(planted_sweeps(), planted_comparisons()).set_index(
        ["comparison", "procedure", "batch_size", "steps"]
    )
    gaps = [4 / math.sqrt(100) + s / 10 - s / 20 for s in (0, 1, 2)]
    row = table.loc[("tying", "tuned_lens", 8, 100)]
    assert (row["c3_mean"], row["c3_ci_low"], row["c3_ci_high"]) == pytest.approx(mean_ci(gaps))
    assert row["n_seeds"] == 3 and row["k_positive"] == 3 and row["tokens"] == 51_200 and row["tokens_per_step"] == 512
    assert row["above_floor_mean"] == pytest.approx(np.mean(gaps) - 0.1)  # tied's floor is 0.1 bits higher
    assert (row["a_readout_floor_bits"], row["b_readout_floor_bits"]) == pytest.approx((0.05, 0.04))
    assert table.loc[("tying", "tuned_lens", 64, 100), "c3_mean"] == pytest.approx(np.mean(gaps))  # both 0.01 lower
    assert table.loc[("tying", "tuned_lens", 64, 100), "tokens_per_step"] == 4_096
    assert table.loc[("tying", "logit", 8, 0), "c3_mean"] == pytest.approx(4 + 0.05)
    null = table.loc[("tied_seeds", "tuned_lens", 8, 4)]
    assert null["c3_mean"] == pytest.approx(-0.1) and null["k_positive"] == 0  # seed s minus seed s + 1
    assert list(table.index.get_level_values(0)) == ["tying"] * 4 + ["tied_seeds"] * 4
    assert list(table.index.get_level_values(2))[:4] == [8, 8, 8, 64]  # by procedure, then batch, then budget


def test_the_gap_at_every_state_is_the_hand_computed_per_seed_gap_beside_the_papers():
    """State 0 of the tuned-lens lens at 100 steps: 0.4 + s / 10 - s / 20 for s = 0, 1, 2; state 1: 0.5 - 0.5 = 0.
    Two layers: state 1 is half the depth, so the paper's gap at the same fraction is its state 8's (0.19 bits), at
    the same state its state 1's (9.61 - 6.64 = 2.97)."""
    by_state = c3_by_state(planted_sweeps(), planted_comparisons()).set_index(
        ["comparison", "procedure", "batch_size", "steps", "layer"]
    )
    row = by_state.loc[("tying", "tuned_lens", 8, 100, 0)]
    assert (row["mean"], row["ci_low"], row["ci_high"]) == pytest.approx(mean_ci([0.4, 0.45, 0.5]))
    assert row["n_seeds"] == 3 and row["fraction"] == 0 and row["layers"] == 2
    assert row["paper_same_state_bits"] == row["paper_same_fraction_bits"] == pytest.approx(8.86 - 7.01)
    one = by_state.loc[("tying", "tuned_lens", 8, 100, 1)]
    assert one["mean"] == pytest.approx(0) and one["fraction"] == 0.5
    assert one["paper_same_state_bits"] == pytest.approx(9.61 - 6.64)
    assert one["paper_same_fraction_bits"] == pytest.approx(3.30 - 3.11)
    assert paper.fig2_gap_at(1 / 3) == pytest.approx((4.06 - 3.74) + (3.61 - 3.52 - (4.06 - 3.74)) / 3)  # 5.33 of 16
    assert by_state.loc[("tied_seeds", "logit", 8, 0, 0), "mean"] == pytest.approx(-0.1)


def test_the_state_curves_the_page_and_the_figure(tmp_path):
    sweeps, comparisons = planted_sweeps(), planted_comparisons()
    states = states_by_lens(sweeps, comparisons)
    tied = states.query("comparison == 'tying' and role == 'a' and steps == 100 and batch_size == 8 and layer == 0")
    assert tied["kl_bits"].item() == pytest.approx(1 + 0.4 + 0.1)  # the mean over seeds 0, 1, 2
    table, by_state = lens_budget_table(sweeps, comparisons), c3_by_state(sweeps, comparisons)
    config = load()
    config["lens_budget"] = {
        "comparisons": {
            "tying": {"a": {"arch": "olmo", "variant": "tied"}, "b": {"arch": "olmo", "variant": "untied"}},
            "tied_seeds": {
                "a": {"arch": "olmo", "variant": "tied"},
                "b": {"arch": "olmo", "variant": "tied", "seed_offset": 1},
            },
        }
    }
    page = lens_budget_markdown(table, by_state, states, lens_budget.described(config), lens_cfg(seq_len=64))
    assert (
        "- tuned-lens's optimiser (SGD, Nesterov, lr 1, linear decay) at 4,096 tokens a step (64 windows of 64)" in page
    )
    assert (
        "- tied_seeds (a = olmo/tied, b = olmo/tied, seed + 1): varies the initialisation and the batches (data "
        "order); holds tying and the training length"
    ) in page
    assert "| paper, same state |  |  | 1.850 | 2.970 | 1.580 |" in page  # states 0-2 of the paper's 16
    assert "| paper, same fraction |  |  | 1.850 | 0.190 | 1.880 |" in page  # its states 0, 8 and 16
    null = page.split("### The gap at every state (tied_seeds)")[1].split("## Held-out KL")[0]
    assert "| logit | 8 | 0 | -0.100 [-0.100, -0.100] |" in null  # seed s minus seed s + 1 at state 0
    assert "paper" not in null and page.count("| paper, same state |") == 1  # the paper's rows beside tying's only
    plot_lens_budget(table, by_state, tmp_path / "lens_budget.pdf")
    assert (tmp_path / "lens_budget.pdf").read_bytes().startswith(b"%PDF")


def test_a_sweep_written_before_the_batch_axis_reads_as_lens_batch_size_without_a_readout_floor():
    old = (
        planted_sweeps().query("batch_size == 8").drop(columns=["batch_size", "tokens_per_step", "readout_floor_bits"])
    )
    table = lens_budget_table(old, planted_comparisons(), lens_cfg(seq_len=64))
    assert set(table["batch_size"]) == {8} and set(table["tokens_per_step"]) == {512}
    assert table["a_readout_floor_bits"].isna().all() and table["a_floor_bits"].eq(0.3).all()


def test_the_length_null_is_said_to_dominate_c3_from_the_tables_own_numbers():
    described = {"tying": {"varies": ["tying", "start"]}, "steps": {"varies": ["length"]}}
    rows = [
        {"comparison": name, "procedure": "certified", "batch_size": 8, "steps": steps, "c3_mean": value}
        for name, values in (("tying", (0.5, 0.02)), ("steps", (-0.3, -0.25)))
        for steps, value in zip((100, 500), values)
    ]
    assert length_sentence(pd.DataFrame(rows), described) == [
        "steps varies the training length alone: its C3 under the certified recipe at 500 steps of 8 windows is "
        "-0.250 bits against tying's +0.020, 12.5 times its size: C3 between models that differ in training length "
        "is dominated by that difference here."
    ]
    rows[1]["c3_mean"] = 0.5
    assert "does not dominate" in length_sentence(pd.DataFrame(rows), described)[0]


def test_a_sweep_trains_tuned_lens_lenses_at_each_batch_and_the_certified_lens_at_lens_batch_size():
    model, val = tiny_model("olmo", initializer_range=0.3), markov_tokens(2_000, 2)
    sweep = sweep_lenses(
        model, markov_tokens(4_000, 1), val, lens_cfg(), ["tuned_lens", "certified"], [2], seed=0, batch_sizes=[2, 4]
    )
    lenses = sweep.drop_duplicates(["procedure", "batch_size"])
    assert lenses[["procedure", "batch_size", "tokens_per_step", "tokens"]].values.tolist() == [
        ["tuned_lens", 2, 2 * SEQ, 2 * 2 * SEQ],
        ["tuned_lens", 4, 4 * SEQ, 2 * 4 * SEQ],
        ["certified", 8, 8 * SEQ, 2 * 8 * SEQ],
    ]
    kl = sweep[sweep["layer"] == 0].set_index(["procedure", "batch_size"])["kl_bits"]
    assert kl[("tuned_lens", 2)] != kl[("tuned_lens", 4)]  # another batch, another lens


# --- The plan ------------------------------------------------------------------------------------------------
def test_comparisons_take_each_runs_seed_offset_step_and_own_seeds_and_sweep_a_shared_run_once():
    config = prepared("configs/trained.yaml").config
    comps = lens_budget.comparisons(config)
    assert [c["comparison"] for c in comps] == (
        ["tying"] * 3
        + ["matched_null"] * 3
        + ["data_order"] * 3
        + ["tied_seeds"] * 2
        + ["untied_seeds"] * 2
        + ["untied_steps"] * 3
    )
    first = {c["comparison"]: c for c in comps if c["seed"] == 2}
    specs = config["lens_budget"]["comparisons"]
    cell, earlier = specs["tying"]["a"]["arch"], specs["untied_steps"]["a"]["step"]
    final = schedule(config, cell).final
    assert first["tying"]["a"] == (cell, "tied", 2, final) and first["tied_seeds"]["b"] == (cell, "tied", 3, final)
    assert first["untied_steps"]["a"] == (cell, "untied", 2, earlier) and earlier < final
    assert first["matched_null"]["b"] == (cell, "untied_b", 2, final) and first["data_order"]["b"][1] == "untied_d"
    runs = lens_budget.sweep_runs(config)
    assert len(runs) == len(set(runs)) == 17  # tied 0-3, untied 0-3 at 6000 and 0-2 at 3000, untied_b, untied_d 0-2


@pytest.mark.parametrize("path", ["configs/lens-budget.yaml", "configs/trained.yaml"])
def test_the_disjoint_seed_nulls_use_no_model_twice(path):
    """Pairs (0, 1) and (2, 3): each seed null's mean is of independent differences, so its Student-t interval
    holds; the pairs (0, 1), (1, 2), (2, 3) shared models, their mean (X0 - X3) / 3."""
    config = prepared(path).config
    for name in ("tied_seeds", "untied_seeds"):
        pairs = [(c["a"], c["b"]) for c in lens_budget.comparisons(config) if c["comparison"] == name]
        models = [run for pair in pairs for run in pair]
        assert len(pairs) == 2 and len(models) == len(set(models)) == 4, pairs
        assert sorted(run[2] for run in models) == [0, 1, 2, 3]


def test_each_comparison_says_what_it_varies_from_its_runs():
    config = load("configs/lens-budget.yaml")
    text = {name: d["text"] for name, d in lens_budget.described(config).items()}
    assert text == {
        "tying": "varies tying and the initialisation; holds the batches (data order) and the training length",
        "matched_null": "varies the initialisation; holds tying, the batches (data order) and the training length",
        "data_order": "varies the batches (data order); holds tying, the initialisation and the training length",
        "tied_seeds": "varies the initialisation and the batches (data order); holds tying and the training length",
        "untied_seeds": "varies the initialisation and the batches (data order); holds tying and the training length",
        "untied_steps": "varies the training length; holds tying, the initialisation and the batches (data order)",
    }


@pytest.mark.parametrize(
    "run, message",
    [
        ({"arch": "gpt2", "variant": "tied"}, "lens_budget.comparisons.x.a: arch 'gpt2' is not in architectures"),
        (
            {"arch": "olmo", "variant": "tied", "step": 700},
            "lens_budget.comparisons.x.a: step 700 is not one of the run's",
        ),
    ],
)
def test_a_comparison_naming_a_run_the_config_lacks_ends_at_the_check(run, message):
    config = load()
    config["lens_budget"] = {"comparisons": {"x": {"a": run, "b": {"arch": "olmo", "variant": "untied"}}}}
    with pytest.raises(PipelineError, match=message):
        lens_budget.check(config)


def test_the_default_builds_sweep_plans_one_job_a_run_and_the_table_and_figure(tmp_path):
    config = load("configs/lens-budget.yaml")
    result = snakemake(tmp_path, "-n", "figures/lens_budget.pdf", config=config)
    assert result.returncode == 0, result.stderr
    jobs = planned_jobs(result)
    assert jobs["lens_budget"] == 17 and jobs["lens_budget_table"] == 1 and jobs["lens_budget_figure"] == 1
    assert jobs["train"] == 14  # olmo tied and untied, seeds 0-3 (3 for the seed nulls); untied_b and untied_d 0-2
    refused = snakemake(tmp_path, "-n", "figures/lens_budget.pdf", config=load())
    assert refused.returncode != 0 and "lens_budget: {comparisons: ...}" in refused.stderr
    batch = snakemake(tmp_path, "-n", "figures/lens_budget.pdf", config=load("configs/lens-batch.yaml"))
    assert batch.returncode == 0, batch.stderr
    assert planned_jobs(batch)["lens_budget"] == 6 and planned_jobs(batch)["train"] == 6  # tied, untied, seeds 0-2

"""C3 against the lens's budget: the procedures, the zero-step lens, the state-0 floor, the table, the plan."""
import math

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from snakerun import planned_jobs, snakemake
from test_lens import SEQ, V, markov_tokens, tiny_model
from tying.claims.lens_budget import c3_by_lens, states_by_lens
from tying.errors import PipelineError
from tying.lens.budget import budget_sweep
from tying.lens.fitting import backward_lens, train_lens
from tying.lens.floor import readout_floor, state0_floor, state0_floors, token_means
from tying.lens.procedures import procedure_recipe
from tying.lens.scoring import evaluate_lens
from tying.lens.translators import TunedLens
from tying.lens.unembed import Readout, stacked_states, token_windows
from tying.plan import lens_budget
from tying.plan.config import load
from tying.plan.grid import add_cells
from tying.report.figures.c3_by_lens import plot_c3_by_lens
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
    assert {k: recipe[k] for k in ("optimizer", "lr", "momentum", "weight_decay", "grad_clip", "schedule", "whiten",
                                   "fisher", "steps")} == {
        "optimizer": "sgd", "lr": 1.0, "momentum": 0.9, "weight_decay": 1e-3, "grad_clip": 1.0, "schedule": "linear",
        "whiten": False, "fisher": False, "steps": 500}
    certified = procedure_recipe("certified", lens_cfg(), 500)
    assert certified["optimizer"] == "adam" and certified["whiten"] and certified["schedule"] == "restart"
    with pytest.raises(PipelineError, match="unknown lens procedure 'lion'"):
        procedure_recipe("lion", lens_cfg(), 10)


def test_the_tuned_lens_recipe_trains_as_a_hand_written_loop_of_the_packages_steps():
    """Three steps of train_lens under the recipe equal torch's SGD (Nesterov, lr 1.0 x (1 - 0.9), weight decay
    1e-3) on the clipped gradient with the learning rate 1, 2/3, 1/3 of the peak: the linear schedule."""
    model, tokens = tiny_model("olmo", initializer_range=0.3), markov_tokens(4_000, 1)
    recipe = {k: v for k, v in procedure_recipe("tuned_lens", lens_cfg(batch_size=4), 3).items()
              if k not in ("train_dtype",)}
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
    sweep = budget_sweep(model, markov_tokens(4_000, 1), val, cfg, ["logit", procedure], [0], seed=0)
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
    sweep = budget_sweep(model, train, val, lens_cfg(), ["logit", "certified"], [60], seed=0)
    state0 = sweep[sweep["layer"] == 0].set_index("procedure")
    floor, readout = state0["floor_bits"].iloc[0], state0["readout_floor_bits"].iloc[0]
    assert 0 < floor < floor + readout < state0.loc["certified", "kl_bits"] < state0.loc["logit", "kl_bits"]
    assert readout > 0.01  # this readout cannot express every token's mean output


# --- The readout floor: planted readouts whose optimum is known --------------------------------------------
def planted_readout(weight, norm=None):
    """A Readout of a given unembedding (V, d), no bias, and final norm (None: none)."""
    readout = Readout.__new__(Readout)
    readout.norm, readout.weight, readout.bias = norm or torch.nn.Identity(), torch.tensor(weight), None
    return readout


def bits(p, q):
    return sum(a * math.log(a / b) for a, b in zip(p, q)) / math.log(2)


def test_a_readout_that_reaches_every_mean_output_has_a_readout_floor_of_zero():
    """An identity unembedding and no norm: z = log pbar_v reads out pbar_v itself."""
    pbar = torch.tensor([[0.2, 0.5, 0.3], [0.1, 0.1, 0.8]], dtype=torch.float64)
    floor = readout_floor(planted_readout([[1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0]]), pbar, torch.ones(2).double())
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
    0.5 for both, floors 0.3 (tied) and 0.2 (untied); a second tied seed `seed + 1` for the null pair."""
    rows = []
    for variant in ("tied", "untied"):
        for seed in [*seeds, max(seeds) + 1]:
            for procedure, steps in (("logit", 0), ("tuned_lens", 4), ("tuned_lens", 100)):
                early = 1 + seed / 20 if variant == "untied" else 1 + 4 / math.sqrt(max(steps, 1)) + seed / 10
                for layer, kl in ((0, early), (1, 0.5), (2, 0.0)):
                    rows.append({"arch": "olmo", "variant": variant, "seed": seed, "step": 10, "procedure": procedure,
                                 "steps": steps, "tokens": steps * 512, "layer": layer, "kl_bits": kl,
                                 "floor_bits": 0.3 if variant == "tied" else 0.2})
    return pd.DataFrame(rows)


def planted_comparisons(seeds=(0, 1, 2)):
    return ([{"comparison": "tying", "seed": s, "a": ("olmo", "tied", s, 10), "b": ("olmo", "untied", s, 10)}
             for s in seeds]
            + [{"comparison": "tied_seeds", "seed": s, "a": ("olmo", "tied", s, 10), "b": ("olmo", "tied", s + 1, 10)}
               for s in seeds])


def test_c3_by_lens_is_each_seeds_early_gap_with_a_student_t_interval_over_seeds():
    table = c3_by_lens(planted_sweeps(), planted_comparisons()).set_index(["comparison", "procedure", "steps"])
    gaps = [4 / math.sqrt(100) + s / 10 - s / 20 for s in (0, 1, 2)]
    row = table.loc[("tying", "tuned_lens", 100)]
    assert (row["c3_mean"], row["c3_ci_low"], row["c3_ci_high"]) == pytest.approx(mean_ci(gaps))
    assert row["n_seeds"] == 3 and row["k_positive"] == 3 and row["tokens"] == 51_200
    assert row["above_floor_mean"] == pytest.approx(np.mean(gaps) - 0.1)  # tied's floor is 0.1 bits higher
    assert table.loc[("tying", "logit", 0), "c3_mean"] == pytest.approx(4 + 0.05)
    null = table.loc[("tied_seeds", "tuned_lens", 4)]
    assert null["c3_mean"] == pytest.approx(-0.1) and null["k_positive"] == 0  # seed s minus seed s + 1
    assert list(table.index.get_level_values(0)) == ["tying"] * 3 + ["tied_seeds"] * 3


def test_the_state_curves_and_the_figure(tmp_path):
    sweeps, comparisons = planted_sweeps(), planted_comparisons()
    states = states_by_lens(sweeps, comparisons)
    tied = states.query("comparison == 'tying' and role == 'a' and steps == 100 and layer == 0")["kl_bits"].item()
    assert tied == pytest.approx(1 + 0.4 + 0.1)  # the mean over seeds 0, 1, 2
    plot_c3_by_lens(c3_by_lens(sweeps, comparisons), tmp_path / "c3_by_lens.pdf")
    assert (tmp_path / "c3_by_lens.pdf").read_bytes().startswith(b"%PDF")


# --- The plan ------------------------------------------------------------------------------------------------
def test_comparisons_take_each_runs_seed_offset_and_step_and_sweep_a_shared_run_once():
    config = load("configs/trained.yaml")
    add_cells(config)
    comps = lens_budget.comparisons(config)
    assert len(comps) == 4 * 3
    first = {c["comparison"]: c for c in comps if c["seed"] == 1}
    cell = "d96_l3_s6000"
    assert first["tying"]["a"] == (cell, "tied", 1, 6000) and first["tied_seeds"]["b"] == (cell, "tied", 2, 6000)
    assert first["untied_steps"]["a"] == (cell, "untied", 1, 3000)
    runs = lens_budget.budget_runs(config)
    assert len(runs) == len(set(runs)) == 11  # tied 0-3, untied 0-3 at 6000, untied 0-2 at 3000


@pytest.mark.parametrize("run, message", [
    ({"arch": "gpt2", "variant": "tied"}, "lens_budget.comparisons.x.a: arch 'gpt2' is not in architectures"),
    ({"arch": "olmo", "variant": "tied", "step": 700}, "lens_budget.comparisons.x.a: step 700 is not one of the run's"),
])
def test_a_comparison_naming_a_run_the_config_lacks_ends_at_the_check(run, message):
    config = load()
    config["lens_budget"] = {"comparisons": {"x": {"a": run, "b": {"arch": "olmo", "variant": "untied"}}}}
    with pytest.raises(PipelineError, match=message):
        lens_budget.check(config)


def test_the_default_builds_sweep_plans_one_job_a_run_and_the_table_and_figure(tmp_path):
    config = load("configs/lens-budget.yaml")
    result = snakemake(tmp_path, "-n", "figures/c3_by_lens.pdf", config=config)
    assert result.returncode == 0, result.stderr
    jobs = planned_jobs(result)
    assert jobs["lens_budget"] == 11 and jobs["c3_by_lens_table"] == 1 and jobs["c3_by_lens_figure"] == 1
    assert jobs["train"] == 8  # olmo tied and untied, seeds 0-3: seed 3 for the null pairs' seed offset
    refused = snakemake(tmp_path, "-n", "figures/c3_by_lens.pdf", config=load())
    assert refused.returncode != 0 and "lens_budget: {comparisons: ...}" in refused.stderr

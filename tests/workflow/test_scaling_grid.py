"""The scaling grid wired into the DAG (issue 21): cells are ordinary architectures and pairs, each with
its own schedule, on a micro grid (two sizes x two step counts, three seeds); the draft grids plan."""

import copy
import re

import pandas as pd
import pytest
import yaml
from snakerun import ROOT, planned_jobs, snakemake

from tying.claims.definitions import ALL_TOKENS
from tying.errors import PipelineError
from tying.plan import grid, pairs, runs
from tying.plan.config import prepared
from tying.plan.layers import load
from tying.plan.run_params import run_params

MICRO = yaml.safe_load((ROOT / "tests" / "micro.yaml").read_text())
# tests/micro.yaml's data, training and analysis; its pairs and targets give way to the grid's cells.
GRID = {
    **MICRO,
    "seeds": [0, 1, 2],
    "architectures": {"olmo": {"family": "olmo"}},
    "pairs": {},
    "figures": {},
    "tables": {},
    "scaling": {
        "head_dim": 8,
        "mlp_ratio": 2,
        "steps": [4, 6],
        "seeds": [0, 1, 2],
        "sizes": [{"hidden_size": 16, "layers": 1}, {"hidden_size": 24, "layers": 1}],
        "lens": ["d16_l1_s4"],
    },
}
CELLS = ["d16_l1_s4", "d16_l1_s6", "d24_l1_s4", "d24_l1_s6"]
AGGREGATES = {"scaling_table", "scaling_figure", "scaling_exposure", "all"}


def _grid(**scaling):
    config = copy.deepcopy(GRID)
    config["scaling"].update(scaling)
    return config


def _merged(config):
    return prepared(passed=config, replace=True).config


def _plain(cell, of=GRID):
    """The cell of grid config `of` written out by hand as a normal config: its architecture, its pair,
    the shared schedule its steps."""
    c = next(c for c in grid.cells(of) if c.name == cell)
    config = {k: copy.deepcopy(v) for k, v in of.items() if k != "scaling"}
    config["train"] |= {"steps": c.steps, "checkpoints": [0, c.steps]}
    config["architectures"] = {
        cell: {
            "family": "olmo",
            "hidden_size": c.hidden_size,
            "layers": c.layers,
            "heads": c.heads,
            "intermediate_size": c.intermediate_size,
        }
    }
    config["pairs"] = {
        cell: {
            "tied": {"arch": cell, "variant": "tied"},
            "untied": {"arch": cell, "variant": "untied"},
            "scaled": list(c.scaled),
            "seeds": list(c.seeds),
            "lens": c.lens,
            "lens_reference": c.lens_reference,
        }
    }
    config["tables"] = {"claims": cell}
    return config


# --- The config: cells become architectures with their own schedule, and pairs ---------------------------
def test_cells_are_merged_as_architectures_with_their_own_schedule_and_pairs():
    config = _merged(_grid())
    assert [c.name for c in grid.scaling_cells(config)] == CELLS
    assert runs.schedule(config, "d24_l1_s6") == pairs.pair_schedule(config, "d24_l1_s6")
    assert (runs.schedule(config, "d24_l1_s6").steps, runs.schedule(config, "d24_l1_s6").checkpoints) == (6, (0, 6))
    assert runs.schedule(config) == runs.schedule(config, "olmo") == runs.Schedule(6, (0, 3, 6))
    assert "train" not in runs.model_dims(config, "d24_l1_s6")
    short, long = run_params(config, "d24_l1_s4", "tied"), run_params(config, "d24_l1_s6", "tied")
    assert (short["steps"], short["checkpoints"], long["steps"]) == (4, [0, 4], 6)
    assert {k: v for k, v in short.items() if k not in ("steps", "checkpoints")} == {
        k: v for k, v in long.items() if k not in ("steps", "checkpoints")
    }
    assert runs.checkpoint_groups(config) == {(0, 3, 6): ["olmo"], (0, 4): CELLS[::2], (0, 6): CELLS[1::2]}
    fraction = config["analysis"]["early_fraction"]
    assert pairs.early_steps(config, "d24_l1_s6") == max(1, round(fraction * 6)) == pairs.early_steps(config)
    assert pairs.scaling_steps(config, "d16_l1_s4") == [4]  # the claims' final step, with no claims table
    assert "4 or 6 x 4 x 16 = 256 to 384 tokens" in runs.token_plan(config)
    merged = copy.deepcopy(config)
    grid.add_cells(merged)  # adding the cells to the same config again changes nothing
    assert merged == config


def test_a_cell_run_alone_has_the_same_run_params_as_in_the_grid():
    config, plain = _merged(_grid()), _merged(_plain("d24_l1_s4"))
    for variant in ("tied", "untied", "tied_x5"):
        assert run_params(config, "d24_l1_s4", variant) == run_params(plain, "d24_l1_s4", variant)
    assert pairs.early_steps(config, "d24_l1_s4") == pairs.early_steps(plain, "d24_l1_s4")
    assert pairs.scaling_steps(config, "d24_l1_s4") == pairs.scaling_steps(plain, "d24_l1_s4")


@pytest.mark.parametrize(
    "change,message",
    [
        (
            lambda c: c["architectures"].update(d16_l1_s4={"family": "olmo"}),
            "architectures: d16_l1_s4 is a scaling cell's name",
        ),
        (
            lambda c: c["architectures"].update(late={"family": "olmo", "train": {"steps": 4, "checkpoints": [0, 5]}}),
            "architectures.late.train.checkpoints: [5] exceed its steps (4)",
        ),
    ],
)
def test_config_errors_name_the_key(change, message):
    config = _grid()
    change(config)
    with pytest.raises(PipelineError, match=re.escape(message)):
        _merged(config)


def test_a_malformed_grid_stops_with_one_line_before_the_cells_are_made(tmp_path):
    config = _grid()
    del config["scaling"]["sizes"]
    result = snakemake(tmp_path, "-n", config=config)
    lines = [ln for ln in result.stderr.splitlines() if not ln.startswith("Using workflow specific profile")]
    assert result.returncode != 0 and lines == ["config error: scaling: 'sizes' is a required property"]


# --- The DAG: each cell's runs on its own train rule, a claims job per cell, the aggregates ------------------
def test_the_micro_grid_plans_a_claims_job_per_cell_with_the_lens_and_its_reference_where_listed(tmp_path):
    result = snakemake(tmp_path, "-n", config=_grid(lens=["d16_l1_s4", "d24_l1_s4"], lens_reference=["d16_l1_s4"]))
    assert result.returncode == 0, result.stderr[-2000:]
    jobs = planned_jobs(result)
    assert jobs["train_0_4"] == jobs["train_0_6"] == 2 * 9 and "train" not in jobs
    assert jobs["cell_claims"] == 4 and jobs["alignment"] == 4 * 3 and AGGREGATES <= set(jobs)
    assert jobs["lens"] == 2 * 6 and jobs["lens_convergence"] == 2
    lens_jobs = re.findall(
        r"^rule (lens\w*):\n(?:    .*\n)*?    wildcards: pair=(\w+), role=\w+, seed=\d+", result.stdout, re.M
    )
    assert {pair for rule, pair in lens_jobs if rule == "lens"} == {"d16_l1_s4", "d24_l1_s4"}
    assert {pair for rule, pair in lens_jobs if rule == "lens_convergence"} == {"d16_l1_s4"}


# --- The draft grids plan --------------------------------------------------------------------------
def _config_file(tmp_path, name):
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(load(f"configs/{name}")))


def test_the_cpu_grid_plans(tmp_path):
    _config_file(tmp_path, "scaling.yaml")
    result = snakemake(tmp_path, "-n")
    assert result.returncode == 0, result.stderr[-2000:]
    jobs = planned_jobs(result)
    cells = grid.cells(load("configs/scaling.yaml"))
    assert jobs["cell_claims"] == len(cells) and AGGREGATES <= set(jobs)
    assert jobs["lens"] == sum(2 * len(c.seeds) for c in cells)  # tied and untied, each seed
    assert jobs["lens_convergence"] == 2 * sum(c.lens_reference for c in cells) > 0


def test_the_cluster_grid_plans_with_the_slurm_profile(tmp_path):
    _config_file(tmp_path, "scaling-cluster.yaml")
    result = snakemake(tmp_path, "-n", "--profile", str(ROOT / "profiles/slurm"))
    assert result.returncode == 0, result.stderr[-2000:]
    jobs = planned_jobs(result)
    assert jobs["cell_claims"] == 15 and jobs["lens"] == 15 * 6 and AGGREGATES <= set(jobs)
    assert jobs["train_0_1000_5000_10000"] == 5 * 9
    train = re.search(r"^rule train_0_1000_5000_10000:\n(.*?)(?=^\S|\Z)", result.stdout, re.M | re.S)[1]
    assert "mem_mb=4000" in train and "runtime=120" in train


# --- The micro grid built: each cell's claims as when run alone; a changed value reruns only its cells ---------
# One seed and no scaled variant keep it to 47 jobs (the claims' direction only, no verdicts: the wiring is under
# test, not the statistics).
BUILT_GRID = _grid(seeds=[0], scaled=[], lens=["d16_l1_s4"]) | {"seeds": [0]}
BUILT_GRID["analysis"] = {**BUILT_GRID["analysis"], "min_stratum_tokens": 1}  # the micro vocabulary's few tokens
AGGREGATE_OUTPUTS = {
    "results/tables/scaling.csv",
    "results/tables/scaling.md",
    "figures/scaling.pdf",
    "results/tables/scaling_exposure.csv",
    "results/tables/scaling_exposure.md",
}


def _jobs(output):
    """[(rule, wildcards or "")] of the jobs a snakemake run (its stderr) or dry run (its stdout) lists; a dry
    run indents a grouped job's rule under its group."""
    blocks = re.findall(r"^\s*(?:local)?rule (\w+):\n(.*?)(?:\n\n|\Z)", output, re.M | re.S)
    return [(rule, (re.search(r"wildcards: (.*)", body) or [None, ""])[1]) for rule, body in blocks]


@pytest.fixture(scope="module")
def built_grid(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("grid")
    result = snakemake(workdir, "all", config=BUILT_GRID)
    assert result.returncode == 0, result.stderr[-3000:]
    return workdir


def test_the_micro_grid_builds_every_cells_claims_and_the_aggregates(built_grid):
    assert all((built_grid / p).stat().st_size > 0 for p in AGGREGATE_OUTPUTS)
    assert sorted(pd.read_csv(built_grid / "results/tables/scaling.csv")["cell"].unique()) == CELLS
    for cell in CELLS:
        claims = set(pd.read_parquet(built_grid / f"results/scaling/{cell}/claims.parquet")["claim"])
        assert ("C3" in claims) == (cell == "d16_l1_s4") and "C7a" not in claims and {"C1", "C6b"} <= claims
    # each cell's strata of draws; its all-token row is its claims table's value
    exposure = pd.read_csv(built_grid / "results/tables/scaling_exposure.csv")
    assert list(exposure["cell"].unique()) == CELLS and {"C1", "C2", "C4"} <= set(exposure["claim"])
    for cell in CELLS:
        claims = pd.read_parquet(built_grid / f"results/scaling/{cell}/claims.parquet")
        pooled = claims[(claims["claim"] == "C1") & (claims["token_set"] == ALL_TOKENS)]["mean"].iloc[0]
        rows = exposure[(exposure["cell"] == cell) & (exposure["claim"] == "C1")].set_index("stratum")
        assert rows.loc[ALL_TOKENS, "mean"] == pytest.approx(pooled, rel=1e-6)  # float32 per-token cosines
        assert len(rows) == 1 + len(MICRO["analysis"].get("exposure_edges", [1, 10, 100, 1000]))


@pytest.mark.parametrize("cell", CELLS)
def test_each_cells_claims_equal_the_same_cell_run_alone_as_a_plain_config(built_grid, cell):
    """The cell written as a plain config (its architecture and pair, train.steps its steps) runs no job but
    its claims table in the grid's directory: snakemake's params, input and code triggers find every training,
    metric and lens job identical to the grid's. That table, from the plain `claims` rule, equals the cell's,
    number for number."""
    target = "results/tables/claims.parquet"
    try:
        result = snakemake(built_grid, target, config=_plain(cell, BUILT_GRID))
        assert result.returncode == 0, result.stderr[-2000:]
        assert _jobs(result.stderr) == [("claims", "")]
        alone = pd.read_parquet(built_grid / target)
    finally:
        (built_grid / target).unlink(missing_ok=True)
    in_grid = pd.read_parquet(built_grid / f"results/scaling/{cell}/claims.parquet")
    pd.testing.assert_frame_equal(alone, in_grid, check_exact=True)


@pytest.mark.parametrize(
    "change,cells,rules,aggregates",
    [
        # one size's heads: both of that size's cells retrain (not their token sets or count baselines: batches do
        # not depend on the dims), and nothing of the other size's
        (
            lambda s: s["sizes"][1].update(heads=2),
            {"d24_l1_s4", "d24_l1_s6"},
            {
                "train_0_4",
                "train_0_6",
                "quality",
                "alignment",
                "knn",
                "evolution",
                "grad_flow",
                "norm_freq",
                "cell_claims",
                "cell_exposure",
            },
            AGGREGATES,
        ),
        # one cell's lens: only that cell's lens jobs and claims table
        (
            lambda s: s.update(lens=["d16_l1_s4", "d16_l1_s6"]),
            {"d16_l1_s6"},
            {"lens", "lens_convergence", "cell_claims"},
            AGGREGATES - {"scaling_exposure"},
        ),  # the strata need no lens
    ],
)
def test_changing_one_cells_value_reruns_only_its_jobs_and_the_aggregates(built_grid, change, cells, rules, aggregates):
    changed = copy.deepcopy(BUILT_GRID)
    change(changed["scaling"])
    result = snakemake(built_grid, "-n", "all", config=changed)
    assert result.returncode == 0, result.stderr[-2000:]
    planned = _jobs(result.stdout)
    named = {c for _, wildcards in planned for c in CELLS if f"={c}," in wildcards + ","}
    assert named == cells
    assert {rule for rule, wildcards in planned if not wildcards} == aggregates
    assert {rule for rule, wildcards in planned if wildcards} == rules


def test_the_depth_sweep_plans_each_depth_on_its_own_steps_with_every_lens_check_and_c3_by_depth(tmp_path):
    _config_file(tmp_path, "depth.yaml")
    result = snakemake(tmp_path, "-n")
    assert result.returncode == 0, result.stderr[-2000:]
    jobs = planned_jobs(result)
    assert jobs["train"] == jobs["train_0_12000"] == jobs["train_0_4000"] == 2 * 3
    assert jobs["train_0_2500"] == 4 * 3  # and the 12-layer lens-budget nulls' untied_b and untied_d runs
    assert jobs["cell_claims"] == 4 and jobs["lens"] == 4 * 6 and jobs["lens_convergence"] == 4 * 2
    assert jobs["lens_budget"] == 4 * 3  # the 12-layer tied, untied, untied_b and untied_d runs
    assert jobs["c3_by_depth_table"] == jobs["c3_by_depth_figure"] == 1 and AGGREGATES <= set(jobs)
    assert "scaling" not in jobs  # no x5 runs, so no C7 metric
    cells = re.findall(r"wildcards: cell=(\w+)", result.stdout)
    assert sorted(set(cells)) == ["d96_l12_s2500", "d96_l2_s12000", "d96_l3_s6000", "d96_l6_s4000"]

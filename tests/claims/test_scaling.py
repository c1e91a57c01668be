"""The scaling sweep's pure parts: grid cells from a config's `scaling` section, the scaling table from
per-cell claims tables, and its figure."""

import copy
import math

import numpy as np
import pandas as pd
import pytest

from tying.claims import scaling
from tying.claims.definitions import Statistic
from tying.claims.exposure import write_exposure_table
from tying.claims.verdicts import claims_table, seed_table
from tying.errors import PipelineError
from tying.plan import grid
from tying.plan.layers import load
from tying.report.figures.scaling import plot_scaling
from tying.stats import mean_ci
from tying.train.models import build_model, model_config


def cell_facts(grid_cells):
    """The cells' facts as the scaling table reads them: one row per cell, grid.FACT_COLUMNS."""
    return pd.DataFrame([c.facts() for c in grid_cells], columns=grid.FACT_COLUMNS)


BASE = {
    "model": {"hidden_size": 96, "layers": 3, "heads": 4, "intermediate_size": 384, "seq_len": 64},
    "train": {"batch_size": 16},
    "tokenizer": {"vocab_size": 4096},
    "variants": {"tied": {"tied": True}, "untied": {"tied": False}, "tied_x5": {"tied": True, "input_grad_scale": 5.0}},
    "scaling": {
        "head_dim": 24,
        "mlp_ratio": 4,
        "steps": [1500, 300],
        "checkpoint_fractions": [0, 0.5, 1],
        "seeds": [0, 1, 2],
        "sizes": [
            {"hidden_size": 48, "layers": 2},
            {"hidden_size": 96, "layers": 3},
            {"hidden_size": 192, "layers": 5},
        ],
    },
}


def _config(**scaling):
    config = copy.deepcopy(BASE)
    config["scaling"].update(scaling)
    return config


def test_cells_expand_sizes_by_steps_with_names_dims_schedules_and_entries():
    cells = grid.cells(
        _config(exclude=["d192_l5_s1500"], lens=["d96_l3_s300", "d96_l3_s1500"], lens_reference=["d96_l3_s300"])
    )
    assert [c.name for c in cells] == ["d48_l2_s300", "d48_l2_s1500", "d96_l3_s300", "d96_l3_s1500", "d192_l5_s300"]
    default = cells[2]  # today's default model
    assert (default.heads, default.intermediate_size, default.tokens) == (4, 384, 300 * 16 * 64)
    assert cells[1].checkpoints == (0, 750, 1500)
    assert [c.lens for c in cells] == [False, False, True, True, False]
    assert [c.lens_reference for c in cells] == [False, False, True, False, False]
    entries = grid.config_entries(cells)
    assert entries["architectures"]["d192_l5_s300"] == {
        "family": "olmo",
        "hidden_size": 192,
        "layers": 5,
        "heads": 8,
        "intermediate_size": 768,
        "train": {"steps": 300, "checkpoints": [0, 150, 300]},
    }
    assert entries["pairs"]["d96_l3_s1500"] == {
        "tied": {"arch": "d96_l3_s1500", "variant": "tied"},
        "untied": {"arch": "d96_l3_s1500", "variant": "untied"},
        "scaled": ["tied_x5"],
        "seeds": [0, 1, 2],
        "lens": True,
        "lens_reference": False,
    }
    assert [c.lens_reference for c in grid.cells(_config(lens=["d48_l2_s300"]))][:2] == [True, False]  # all: lens cells


def test_a_size_may_name_its_own_scaled_variants():
    sizes = [{"hidden_size": 96, "layers": 3}, {"hidden_size": 96, "layers": 6, "scaled": []}]
    cells = grid.cells(_config(sizes=sizes, steps=[300]))
    assert [c.scaled for c in cells] == [("tied_x5",), ()]
    assert grid.config_entries(cells)["pairs"]["d96_l6_s300"]["scaled"] == []
    with pytest.raises(PipelineError, match="unknown variant 'tied_x9'"):
        grid.cells(_config(sizes=[{"hidden_size": 96, "layers": 6, "scaled": ["tied_x9"]}]))


@pytest.mark.parametrize("tied", [True, False])
def test_parameter_counts_are_a_built_models_numel(tied):
    cell = grid.cells(
        _config(sizes=[{"hidden_size": 48, "layers": 2, "heads": 3, "intermediate_size": 100}], steps=[10])
    )[0]
    model = build_model(
        model_config(
            "olmo",
            vocab_size=cell.vocab_size,
            hidden_size=48,
            layers=2,
            heads=3,
            seq_len=64,
            tied=tied,
            eos_id=0,
            intermediate_size=100,
        ),
        0,
    )
    non_embedding, embedding = cell.params(tied)
    assert non_embedding + embedding == sum(p.numel() for p in model.parameters())
    inputs = model.get_input_embeddings().weight.numel()
    assert embedding == inputs * (1 if tied else 2)
    assert math.isclose(cell.embedding_share(tied), embedding / (non_embedding + embedding))


def test_embedding_share_falls_along_the_size_axis():
    facts = cell_facts(grid.cells(_config(steps=[300])))
    assert facts["params"].is_monotonic_increasing
    assert facts["embedding_share"].is_monotonic_decreasing and facts["embedding_share"].nunique() == 3
    assert (facts["embedding_share_untied"] > facts["embedding_share"]).all()
    assert facts.loc[1, "params"] == 835_584  # the default model, tied


@pytest.mark.parametrize(
    "scaling, message",
    [
        ({"seeds": []}, "scaling.seeds: no seeds"),
        ({"sizes": [{"hidden_size": 100, "layers": 2}]}, "multiple of scaling.head_dim"),
        ({"sizes": [{"hidden_size": 96, "layers": 2, "heads": 32}]}, "even head size"),
        ({"checkpoint_fractions": [0.5, 1]}, "from 0 to 1"),
        ({"exclude": ["d1_l1_s1"]}, "unknown cells"),
        ({"lens": "some"}, "list of cell names"),
        ({"lens_reference": "some"}, "list of cell names"),
        ({"lens": ["d48_l2_s300"], "lens_reference": ["d96_l3_s300"]}, r"\['d96_l3_s300'\] are not lens cells"),
        ({"scaled": ["untied"]}, "not tied"),
    ],
)
def test_bad_grids_are_refused_in_one_line(scaling, message):
    with pytest.raises(PipelineError, match=message):
        grid.cells(_config(**scaling))


@pytest.mark.parametrize(
    "path,cells",
    [
        ("configs/scaling.yaml", 5),
        ("configs/scaling-cluster.yaml", 15),
        ("configs/trained.yaml", 1),
        ("configs/depth.yaml", 4),
        ("configs/width.yaml", 3),
    ],
)
def test_the_shipped_grids_expand(path, cells):
    names = [c.name for c in grid.cells(load(path))]
    assert len(set(names)) == len(names) == cells, names


def _claims(cell_index):
    """A cell's claims table and seed table from synthetic per-seed values (C1 with a chance level, C3 without)."""
    rng = np.random.default_rng(cell_index)
    seeds = pd.Index([0, 1, 2], name="seed")
    stats = {
        "C1": Statistic(
            pd.Series(0.1 * cell_index + rng.normal(0.3, 0.02, 3), seeds),
            chance=pd.Series(rng.normal(0.01, 0.001, 3), seeds),
        ),
        "C3": Statistic(pd.Series(rng.normal(0.1 * cell_index, 0.05, 3), seeds)),
    }
    return claims_table(stats), seed_table(stats)


def _table(with_seeds=False):
    """(cell facts, {cell: (claims table, seed table)}, the scaling table)."""
    facts = cell_facts(grid.cells(_config(exclude=["d192_l5_s1500"])))
    made = {cell: _claims(i) for i, cell in enumerate(facts["cell"])}
    seeds = {c: s for c, (_, s) in made.items()} if with_seeds else None
    return facts, made, scaling.scaling_table({c: t for c, (t, _) in made.items()}, facts, seeds)


def test_scaling_table_carries_each_cells_claims_and_facts_exactly():
    facts, made, table = _table(with_seeds=True)
    assert list(table.columns) == scaling.COLUMNS
    assert list(table["cell"]) == [c for c in facts["cell"] for _ in ("C1", "C3")]
    for cell, (claims, seeds) in made.items():
        rows = table[table["cell"] == cell].set_index("claim")
        for column in ("mean", "ci_low", "ci_high", "n_seeds", "verdict", "paper_value"):
            assert rows[column].tolist() == claims.set_index("claim")[column].tolist()
        assert rows.loc["C1", "chance"] == seeds[seeds["claim"] == "C1"]["chance"].mean()
        assert math.isnan(rows.loc["C3", "chance"])
        fact = facts.set_index("cell").loc[cell]
        assert (
            (
                rows[["params", "embedding_share", "tokens", "steps"]]
                == fact[["params", "embedding_share", "tokens", "steps"]]
            )
            .all()
            .all()
        )


def test_scaling_table_without_seed_tables_reads_the_chance_text(tmp_path):
    _, made, table = _table()
    first = made["d48_l2_s300"][0].set_index("claim")
    row = table[(table["cell"] == "d48_l2_s300") & (table["claim"] == "C1")].iloc[0]
    assert row["chance"] == float(first.loc["C1", "chance"])
    scaling.write_scaling(table, tmp_path / "scaling.csv", tmp_path / "scaling.md")
    md = (tmp_path / "scaling.md").read_text()
    assert "| cell |" in md and "d192_l5_s300" in md and "| ours |" not in md.splitlines()[1]
    assert len(pd.read_csv(tmp_path / "scaling.csv")) == len(table)


def test_scaling_table_needs_every_cells_claims():
    facts = cell_facts(grid.cells(_config()))
    with pytest.raises(PipelineError, match="no claims table"):
        scaling.scaling_table({}, facts)


def test_the_exposure_table_stacks_each_cells_strata_beside_its_facts_in_grid_order(tmp_path):
    facts = cell_facts(grid.cells(_config(exclude=["d192_l5_s1500"])))
    tables = {
        cell: pd.DataFrame(
            {
                "pair": cell,
                "claim": ["C1", "C1"],
                "stratum": ["all analysed", "1-9"],
                "tokens": ["900-910", "80"],
                "mean": [0.1 * i, 0.2 * i],
            }
        )
        for i, cell in enumerate(facts["cell"])
    }
    table = scaling.exposure_by_cell(dict(reversed(tables.items())), facts)
    assert list(table["cell"]) == [c for c in facts["cell"] for _ in range(2)]
    assert list(table.columns[:5]) == ["cell", "hidden_size", "layers", "steps", "claim"]
    assert table["mean"].tolist() == [m for t in tables.values() for m in t["mean"]]
    assert table["tokens"].tolist() == ["900-910", "80"] * len(tables)  # the strata's tokens, not the cell's budget
    assert (table.set_index("cell")["steps"] == facts.set_index("cell")["steps"].reindex(table["cell"])).all()
    write_exposure_table(table, tmp_path / "e.csv", tmp_path / "e.md", scaling.EXPOSURE_COLUMNS)
    assert len(pd.read_csv(tmp_path / "e.csv")) == len(table) and "| stratum |" in (tmp_path / "e.md").read_text()
    with pytest.raises(PipelineError, match=r"no claims by exposure for cells \['d48_l2_s300'\]"):
        scaling.exposure_by_cell({c: t for c, t in tables.items() if c != "d48_l2_s300"}, facts)


def test_scaling_figure_draws_all_tokens_solid_and_comparable_tokens_apart(tmp_path):
    _, _, table = _table()
    comparable = table[table["claim"] == "C1"].assign(token_set="drawn >= 100", mean=lambda t: t["mean"] + 1)
    path = tmp_path / "scaling.pdf"
    fig = plot_scaling(pd.concat([table, comparable], ignore_index=True), path)
    data = path.read_bytes()
    assert data.startswith(b"%PDF") and len(data) > 1000
    c1 = table[(table["claim"] == "C1") & (table["steps"] == 300)].sort_values("params")["mean"].tolist()
    lines = [(ln.get_linestyle(), list(ln.get_ydata())) for ln in fig.axes[0].get_lines() if len(ln.get_ydata()) == 3]
    assert ("-", c1) in lines and ("-.", [m + 1 for m in c1]) in lines


def test_paired_trends_difference_each_seed_between_neighbouring_cells():
    facts = cell_facts(grid.cells(_config(exclude=["d192_l5_s1500"])))
    made = {cell: _claims(i) for i, cell in enumerate(facts["cell"])}
    seeds = {c: s for c, (_, s) in made.items()}
    trends = scaling.paired_trends(seeds, facts)
    assert list(trends.columns) == scaling.TREND_COLUMNS
    pairs = set(zip(trends["factor"], trends["from_cell"], trends["to_cell"]))
    assert pairs == {
        ("tokens", "d48_l2_s300", "d48_l2_s1500"),
        ("tokens", "d96_l3_s300", "d96_l3_s1500"),
        ("size", "d48_l2_s300", "d96_l3_s300"),
        ("size", "d96_l3_s300", "d192_l5_s300"),
        ("size", "d48_l2_s1500", "d96_l3_s1500"),
    }
    row = trends[
        (trends["from_cell"] == "d48_l2_s300") & (trends["to_cell"] == "d96_l3_s300") & (trends["claim"] == "C1")
    ].iloc[0]
    a, b = (seeds[c][seeds[c]["claim"] == "C1"].set_index("seed")["value"] for c in ("d48_l2_s300", "d96_l3_s300"))
    mean, low, high = mean_ci(b - a)
    assert (row["mean"], row["ci_low"], row["ci_high"], row["n_seeds"]) == pytest.approx((mean, low, high, 3))
    assert row["trend"] == ("up" if low > 0 else "down" if high < 0 else "unclear")

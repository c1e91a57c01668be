"""Claims by lookup share: the share of steps whose batch looked a token up, counted from the runs' batches,
and the per-token claims within its strata."""

import numpy as np
import pandas as pd
import pytest

from tying.claims.exposure import ALL_TOKENS, exposure_table, share_labels, strata, token_values, with_draws
from tying.data.batches import train_batch
from tying.data.token_sets import drawn_by_step, drawn_frame, lookups_by_step, write_token_set
from tying.errors import PipelineError
from tying.plan.config import prepared
from tying.plan.grid import cells

V = 40
EDGES = [0, 0.01, 0.1, 0.5, 0.9]


def _steps_with(ids, token, seed, steps, batch_size, seq_len):
    """How many of the steps 1..steps had `token` at an input position, from train_batch itself."""
    return sum(bool((train_batch(ids, s, seed, batch_size, seq_len)[0] == token).any()) for s in range(1, steps + 1))


def _rare_token_ids():
    """Token ids over 0..38, with token 39 planted at 60 places: most steps' batches miss it."""
    ids = np.random.default_rng(0).integers(0, V - 1, size=4000)
    ids[np.random.default_rng(1).choice(len(ids) - 1, 60, replace=False)] = V - 1
    return ids.astype(np.uint16)


def test_lookups_count_the_steps_whose_batch_held_the_token_not_its_positions():
    ids = _rare_token_ids()
    looked = lookups_by_step(ids, V, seed=3, steps=30, batch_size=4, seq_len=8, at=[10, 30])
    drawn = drawn_by_step(ids, V, seed=3, steps=30, batch_size=4, seq_len=8)[30]
    k = _steps_with(ids, V - 1, 3, 30, 4, 8)
    assert 0 < k < 30 and looked[30][V - 1] == k
    assert looked[10][V - 1] == _steps_with(ids, V - 1, 3, 10, 4, 8)
    assert (looked[30] <= np.minimum(drawn, 30)).all() and (looked[30] > 0).tolist() == (drawn > 0).tolist()
    common = int(np.argmax(drawn))  # drawn more often than there are steps, yet missed by some batches
    assert drawn[common] > 30 and looked[30][common] == _steps_with(ids, common, 3, 30, 4, 8) < 30


def test_a_token_looked_up_in_k_of_n_steps_lands_in_its_lookup_share_stratum(tmp_path):
    ids, steps = _rare_token_ids(), 30
    counts = pd.DataFrame({"token_id": np.arange(V), "count": np.bincount(ids, minlength=V)})
    frame = drawn_frame(
        drawn_by_step(ids, V, 5, steps, 4, 8, at=[15, steps]),
        4,
        8,
        lookups_by_step(ids, V, 5, steps, 4, 8, at=[15, steps]),
    )
    write_token_set(counts, [frame], steps, 1, tmp_path / "set.parquet")
    token_set = pd.read_parquet(tmp_path / "set.parquet").set_index("token_id")
    k = _steps_with(ids, V - 1, 5, steps, 4, 8)
    assert token_set.loc[V - 1, "looked_up"] == k and token_set.loc[V - 1, "lookup_share"] == pytest.approx(k / steps)
    assert 0.1 <= k / steps < 0.5  # so the planted token's stratum is '10-50%'
    assert share_labels(EDGES)[strata([token_set.loc[V - 1, "lookup_share"]], EDGES)[0]] == "10-50%"
    assert token_set.loc[0, "lookup_share"] == pytest.approx(_steps_with(ids, 0, 5, steps, 4, 8) / steps)


def test_share_strata_are_lower_edges_with_percent_labels():
    assert share_labels(EDGES) == ["0-1%", "1-10%", "10-50%", "50-90%", ">= 90%"]
    assert strata([0.0, 0.009, 0.01, 0.3, 0.5, 0.95, 1.0], EDGES).tolist() == [0, 0, 1, 2, 3, 4, 4]


def test_a_gap_carried_by_rarely_looked_up_tokens_shows_in_their_share_stratum():
    # 300 tokens looked up in 1-9% of the steps carry an input-minus-output drift gap of 0.4; 100 looked up in
    # 50-89% carry none.
    per_token, sets = [], []
    for seed in (0, 1, 2):
        rng = np.random.default_rng(seed)
        share = np.r_[rng.uniform(0.01, 0.09, 300), rng.uniform(0.5, 0.89, 100)]
        base = rng.uniform(0.3, 0.6, 400)
        drift_in = base + np.where(share < 0.1, 0.4, 0.0) + rng.normal(0, 0.01, 400)
        per_token += [
            pd.DataFrame(
                {"run": "main", "seed": seed, "matrix": m, "step": 100, "token_id": np.arange(400), "drift": d}
            )
            for m, d in (("input", drift_in), ("output", base))
        ]
        sets.append(
            pd.DataFrame(
                {
                    "pair": "main",
                    "seed": seed,
                    "token_id": np.arange(400),
                    "drawn": 50,
                    "per_million": 1.0,
                    "lookup_share": share,
                }
            )
        )
    values = with_draws(token_values("main", evolution_tokens=pd.concat(per_token)), pd.concat(sets))
    table = exposure_table(values, EDGES, 30, by="lookup_share").set_index(["claim", "stratum"])
    assert table.loc[("C4", "1-10%"), "mean"] == pytest.approx(0.4, abs=0.01)
    assert table.loc[("C4", "1-10%"), "verdict"] == "holds"
    assert table.loc[("C4", "50-90%"), "mean"] == pytest.approx(0.0, abs=0.01)
    assert table.loc[("C4", "50-90%"), ["share_low", "share_high"]].tolist() == [0.5, 0.9]
    assert table.loc[("C4", ALL_TOKENS), "mean"] == pytest.approx(0.3, abs=0.01)
    assert table.loc[("C4", "0-1%"), "left_out"] == "fewer than 30 tokens in a seed"
    with pytest.raises(PipelineError, match="no lookup_share for every token: their drawn counts predate it"):
        exposure_table(values.drop(columns="lookup_share"), EDGES, 30, by="lookup_share")


def test_the_large_batch_regime_reads_more_tokens_than_the_trained_regime_in_16k_token_steps():
    trained = prepared("configs/trained.yaml").config
    large = prepared("configs/trained.yaml", "configs/large-batch.yaml").config
    (small_cell,), (large_cell,) = cells(trained), cells(large)
    assert large["train"]["batch_size"] * large["model"]["seq_len"] >= 16_384
    tokens = [
        c.steps * config["train"]["batch_size"] * config["model"]["seq_len"]
        for c, config in ((small_cell, trained), (large_cell, large))
    ]
    assert tokens[1] > tokens[0]
    assert large["train"]["warmup"] / large_cell.steps == pytest.approx(
        trained["train"]["warmup"] / small_cell.steps, abs=0.002
    )
    assert large["tables"]["claims_by_lookup"] == [large_cell.name]

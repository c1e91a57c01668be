"""Claims by exposure, the comparable-token rows, the calibrating controls, and claims over training on
the tokens seen by each checkpoint."""

import numpy as np
import pandas as pd
import pytest
import torch
from hubfixtures import build_survey_cache, snapshot_dir

from tying.checkpoints.controls import control_model
from tying.checkpoints.embeddings import Embeddings, load_embeddings
from tying.claims import definitions, statistics, verdicts
from tying.claims.claims_over_training import point_rows
from tying.claims.exposure import (
    ALL_TOKENS,
    comparable_rows,
    exposure_table,
    pairs_values,
    strata,
    strata_text,
    stratum_labels,
    token_values,
    with_draws,
)
from tying.data.token_sets import seen_by
from tying.metrics.alignment import alignment_frame, token_split
from tying.metrics.evolution import evolution_frames
from tying.metrics.knn_overlap import knn_frame
from tying.tidy import with_ids

SEEDS = (0, 1, 2)
V, D = 400, 12
TOKENS = tuple(map(str, range(V)))
EDGES = [1, 10, 100, 1000]


def test_strata_are_log_spaced_lower_edges():
    assert stratum_labels(EDGES) == ["1-9", "10-99", "100-999", ">= 1000"]
    assert strata([0, 1, 9, 10, 99, 100, 5000], EDGES).tolist() == [-1, 0, 0, 1, 1, 2, 3]


def _planted_drift(seed, rare_gap):
    """An untied run's per-token drifts: the 300 rarely drawn tokens (1-9 draws) carry an input-minus-output
    gap of `rare_gap`; the 100 well-exposed ones (100-999 draws) none."""
    rng = np.random.default_rng(seed)
    drawn = np.r_[rng.integers(1, 10, 300), rng.integers(100, 1000, 100)]
    base = rng.uniform(0.3, 0.6, V)
    drift_in = base + np.where(drawn < 10, rare_gap, 0.0) + rng.normal(0, 0.01, V)
    per_token = pd.concat(
        [
            pd.DataFrame({"run": "main", "seed": seed, "matrix": m, "step": 300, "token_id": np.arange(V), "drift": d})
            for m, d in (("input", drift_in), ("output", base))
        ],
        ignore_index=True,
    )
    token_set = pd.DataFrame(
        {"pair": "main", "seed": seed, "token_id": np.arange(V), "drawn": drawn, "per_million": drawn / 1e5 * 1e6}
    )
    return per_token, token_set


def test_a_gap_carried_by_rarely_drawn_tokens_shows_in_their_stratum_and_not_in_the_comparable_row():
    parts = [_planted_drift(seed, rare_gap=0.5) for seed in SEEDS]
    per_token = pd.concat([p for p, _ in parts], ignore_index=True)
    token_sets = pd.concat([t for _, t in parts], ignore_index=True)
    values = with_draws(token_values("main", evolution_tokens=per_token), token_sets)
    table = exposure_table(values, EDGES, min_tokens=30).set_index(["claim", "stratum"])
    assert table.loc[("C4", "1-9"), "mean"] == pytest.approx(0.5, abs=0.01)
    assert table.loc[("C4", "1-9"), "verdict"] == "holds"
    assert table.loc[("C4", "100-999"), "mean"] == pytest.approx(0.0, abs=0.01)
    assert table.loc[("C4", "100-999"), "verdict"] != "holds"
    assert table.loc[("C4", ALL_TOKENS), "mean"] == pytest.approx(0.375, abs=0.01)  # the pooled number: 3/4 rare
    assert table.loc[("C4", ">= 1000"), "left_out"] == "fewer than 30 tokens in a seed"
    assert np.isnan(table.loc[("C4", ">= 1000"), "mean"])
    rows, seeds = comparable_rows(values, ["main"], 100)
    row = rows.set_index("claim").loc["C4"]
    assert row["token_set"] == "drawn >= 100" and seeds["value"].mean() == pytest.approx(row["mean"])
    assert row["token_set"] == "drawn >= 100" and row["mean"] == pytest.approx(0.0, abs=0.01)
    assert row["verdict"] != "holds" and row["detail"] == "100 tokens a seed"
    # and the claims table's own pooled value is the all-token stratum's
    pooled = statistics.drift_gap(per_token.groupby(["run", "seed", "matrix", "step"], as_index=False)["drift"].mean())
    assert table.loc[("C4", ALL_TOKENS), "mean"] == pytest.approx(pooled.mean())


def _pair(seed):
    g = torch.Generator().manual_seed(seed)
    inp, out = torch.randn(V, D, generator=g), torch.randn(V, D, generator=g)
    tied = out + 0.3 * inp + 0.5 * torch.randn(V, D, generator=g)
    return Embeddings(inp, out, False, TOKENS), Embeddings(tied, tied, True, TOKENS)


def test_the_all_token_stratum_of_c1_and_c2_is_the_claims_tables_value():
    alignment, knn, sets = [], [], []
    for seed in SEEDS:
        untied, tied = _pair(seed)
        ids = {"pair": "main", "seed": seed, "step": 300}
        alignment.append(with_ids(alignment_frame(untied, tied, maps=("linear",)), ids))
        knn.append(with_ids(knn_frame(untied, tied, ks=(5,)), ids))
        sets.append(
            pd.DataFrame(
                {
                    "pair": "main",
                    "seed": seed,
                    "token_id": np.arange(V),
                    "drawn": np.arange(V) + 1,
                    "per_million": np.nan,
                }
            )
        )
    alignment, knn = pd.concat(alignment), pd.concat(knn)
    values = pairs_values(["main"], pd.concat(sets), alignment, knn, k=5)
    table = exposure_table(values, EDGES, 30).set_index(["claim", "stratum"])
    stats = verdicts.claims_table(statistics.claim_statistics(alignment=alignment, knn=knn, k=5)).set_index("claim")
    for cid in ("C1", "C2"):
        assert table.loc[(cid, ALL_TOKENS), "mean"] == pytest.approx(stats.loc[cid, "mean"], abs=1e-6)
        assert table.loc[(cid, ALL_TOKENS), "verdict"] == stats.loc[cid, "verdict"]
    assert table.loc[("C1", "1-9"), "left_out"]  # 9 tokens, 20% of them held out


def _numpy_c1(untied, tied, held_out=0.2, seed=0):
    """C1 held out, from scratch: least squares on the fit rows centred by their means, cosines on the rest."""
    order, n_fit = token_split(tied.shape[0], held_out, seed)
    fit, test = order[:n_fit].numpy(), order[n_fit:].numpy()
    target = tied.numpy().astype(np.float64)

    def held_out_cosine(source):
        source = source.numpy().astype(np.float64)
        mu_s, mu_t = source[fit].mean(0), target[fit].mean(0)
        m = np.linalg.lstsq(source[fit] - mu_s, target[fit] - mu_t, rcond=None)[0]
        a, b = (source[test] - mu_s) @ m, target[test] - mu_t
        return (np.sum(a * b, 1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))).mean()

    return held_out_cosine(untied.output) - held_out_cosine(untied.input)


@pytest.fixture
def second_untied(tmp_path):
    """A released-style untied model directory: the control's second untied model."""
    commits = build_survey_cache(tmp_path / "cache")
    return snapshot_dir(tmp_path / "cache", "test-org/survey-untied", commits["test-org/survey-untied"])


def test_the_positive_control_is_c1_with_a_second_runs_output_matrix_as_tied(tmp_path, second_untied):
    control_model(second_untied, "output", tmp_path / "positive")
    second, positive = load_embeddings(second_untied), load_embeddings(tmp_path / "positive")
    assert positive.tied and torch.equal(positive.input, second.output)
    g = torch.Generator().manual_seed(3)
    n, d = second.output.shape
    untied = Embeddings(
        torch.randn(n, d, generator=g), second.output + 0.5 * torch.randn(n, d, generator=g), False, second.tokens
    )  # the claims pair's untied run: its output rows like the control's
    frame = with_ids(alignment_frame(untied, positive, maps=("linear",)), {"pair": "positive", "seed": 0, "step": 1})
    ours = statistics.alignment_gap(frame, pair="positive").iloc[0]
    assert ours == pytest.approx(_numpy_c1(untied, positive.input), abs=1e-5)
    assert ours > 0.3  # the positive control holds: an output matrix in the tied role is output-like


def test_the_mixture_control_is_the_row_normalised_mean_of_the_input_and_output_matrices(tmp_path, second_untied):
    control_model(second_untied, "mixture", tmp_path / "mixture")
    second, mixture = load_embeddings(second_untied), load_embeddings(tmp_path / "mixture")
    inp, out = second.input.numpy().astype(np.float64), second.output.numpy().astype(np.float64)
    expected = (inp / np.linalg.norm(inp, axis=1, keepdims=True) + out / np.linalg.norm(out, axis=1, keepdims=True)) / 2
    assert mixture.tied
    np.testing.assert_allclose(mixture.input.numpy(), expected, rtol=1e-6, atol=1e-7)


def test_calibrated_c1_is_the_pairs_gap_minus_the_mixtures_paired_by_seed():
    own = {"C1": definitions.Statistic(pd.Series([0.5, 0.6, 0.7, 0.8], index=[0, 1, 2, 3]))}
    mixture = {"C1": definitions.Statistic(pd.Series([0.2, 0.1, 0.3], index=[0, 1, 2]))}
    calibrated = statistics.calibrated_statistics(own, mixture)
    assert calibrated["C1cal"].values.to_dict() == pytest.approx({0: 0.3, 1: 0.5, 2: 0.4})
    row = verdicts.claims_table(calibrated).iloc[0]
    assert row["claim"] == "C1cal" and row["n_seeds"] == 3 and row["verdict"] == "holds"


def test_claims_over_training_leave_out_tokens_first_drawn_after_the_checkpoint():
    # Tokens 0-199 are first drawn after step 50: their untied input rows still hold their step-0 direction
    # there (drift 1), their output rows have moved. Counted, they would push C4 toward "holds".
    g = torch.Generator().manual_seed(0)
    start_in, start_out = torch.randn(V, D, generator=g), torch.randn(V, D, generator=g)
    mid_in = start_in + 0.9 * torch.randn(V, D, generator=g)
    mid_in[:200] = start_in[:200]
    mid_out = start_out + 0.9 * torch.randn(V, D, generator=g)
    runs = [(0, Embeddings(start_in, start_out, False, TOKENS)), (50, Embeddings(mid_in, mid_out, False, TOKENS))]
    _, per_token = evolution_frames(runs)
    per_token = with_ids(per_token, {"run": "main", "seed": 0})
    by_step = pd.DataFrame({"step": 50, "token_id": np.arange(V), "drawn": np.r_[np.zeros(200), np.ones(V - 200)]})
    keep = seen_by(by_step, 50, 1)
    assert keep.tolist() == list(range(200, V))
    tied = Embeddings(mid_out, mid_out, True, TOKENS)
    rows = point_rows(
        runs[1][1],
        tied,
        {},
        keep,
        per_token,
        ids={"pair": "main", "seed": 0, "step": 50},
        analysis={"held_out": 0.2, "split_seed": 0},
        k=5,
        approximate=False,
        scaled_variant=None,
    )
    c4 = rows[(rows["claim"] == "C4") & (rows["kind"] == "value")]["value"].iloc[0]
    cos = torch.nn.functional.cosine_similarity
    expected = (cos(mid_in[200:], start_in[200:], dim=1) - cos(mid_out[200:], start_out[200:], dim=1)).mean().item()
    everything = (cos(mid_in, start_in, dim=1) - cos(mid_out, start_out, dim=1)).mean().item()
    assert c4 == pytest.approx(expected, abs=1e-6)
    assert everything - c4 > 0.1  # the not-yet-drawn rows would have inflated it
    c1_tokens = rows[(rows["claim"] == "C1")]
    assert len(c1_tokens)  # C1 and C2 are computed on the same tokens


def test_a_checkpoints_tokens_by_stratum_of_draws():
    by_step = pd.DataFrame({"step": [50] * 5, "token_id": range(5), "drawn": [0, 3, 12, 150, 2000]})
    text = strata_text(by_step, 50, seen_by(by_step, 50, 1), EDGES)
    assert text == "1-9: 1, 10-99: 1, 100-999: 1, >= 1000: 1"

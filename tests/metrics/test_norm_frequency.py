import numpy as np
import pandas as pd
import pytest
import torch

from tying.checkpoints.embeddings import Embeddings
from tying.errors import PipelineError
from tying.metrics.norm_frequency import binned_norms, frequency_bins, norm_frequency_frame, shape_stats

TOKENS = ("a", "b", "c", "d")


def test_join_of_norms_counts_and_initial_norms():
    inp = torch.tensor([[3.0, 4.0], [1.0, 0.0], [0.0, 2.0], [0.0, 0.0]])
    out = 2 * inp
    tied = torch.tensor([[1.0, 1.0], [0.0, 1.0], [0.0, 0.0], [6.0, 8.0]])
    token_set = pd.DataFrame({"token_id": [0, 2], "count": [6, 7], "drawn": [3, 1]})
    untied, tied = Embeddings(inp, out, False, TOKENS), Embeddings(tied, tied, True, TOKENS)
    start = (Embeddings(inp / 5, out / 2, False, TOKENS), Embeddings(2 * tied.input, 2 * tied.input, True, TOKENS))
    frame = norm_frequency_frame(untied, tied, token_set, start)
    assert list(frame.columns) == [
        "matrix",
        "token_id",
        "count",
        "drawn",
        "per_million",
        "norm",
        "initial_norm",
        "no_gradient_level",
        "n_tokens",
    ]
    assert frame.loc[frame["matrix"] == "tied", "drawn"].tolist() == [3, 1]
    assert frame["matrix"].unique().tolist() == ["untied_input", "untied_output", "tied"]
    by = frame.set_index(["matrix", "token_id"])
    assert by.loc["untied_input", "count"].tolist() == [6, 7]  # only the token set's tokens
    assert by.loc["untied_input", "norm"].tolist() == pytest.approx([5.0, 2.0])
    assert by.loc["untied_input", "initial_norm"].tolist() == pytest.approx([1.0, 0.4])
    assert by.loc["untied_output", "norm"].tolist() == pytest.approx([10.0, 4.0])
    assert by.loc["untied_output", "initial_norm"].tolist() == pytest.approx([5.0, 2.0])
    assert by.loc["tied", "norm"].tolist() == pytest.approx([2**0.5, 0.0])
    assert by.loc["tied", "initial_norm"].tolist() == pytest.approx([2 * 2**0.5, 0.0])
    assert (frame["n_tokens"] == 2).all()
    assert norm_frequency_frame(untied, tied, token_set)["initial_norm"].isna().all()


def test_token_ids_outside_the_vocabulary_are_errors():
    e = Embeddings(torch.ones(4, 2), torch.ones(4, 2), False, TOKENS)
    t = Embeddings(torch.ones(4, 2), torch.ones(4, 2), True, TOKENS)
    with pytest.raises(PipelineError, match="outside the vocabulary"):
        norm_frequency_frame(e, t, pd.DataFrame({"token_id": [4], "count": [1]}))


def _profile(name, norm_of_log_count, per_bin=10, bins=12):
    """`per_bin` tokens in each of `bins` quarter-decade bins from count 1; norm = f(bin centre)."""
    log_count = np.repeat(0.25 * np.arange(bins) + 0.125, per_bin)
    return pd.DataFrame(
        {
            "matrix": name,
            "drawn": np.round(10**log_count).astype(int),
            "norm": [norm_of_log_count(x) for x in log_count],
        }
    )


def test_shape_stats_flat_rising_and_rise_then_fall():
    frame = pd.concat(
        [
            _profile("flat", lambda x: 1.0),
            _profile("rising", lambda x: 1.0 + x),
            _profile("peaked", lambda x: 2.0 - abs(x - 1.5)),  # peak at 10^1.5, 2.0; ends at 0.625 and 0.625 + ...
            pd.DataFrame({"matrix": ["flat"], "drawn": [0], "norm": [50.0]}),  # an undrawn token is left out
        ]
    )
    stats = shape_stats(frame).set_index("matrix")
    assert list(stats.columns) == ["bins", "spread", "rise", "fall", "peak_count", "drift", "net_drift", "spearman"]
    assert stats.loc["flat", ["spread", "rise", "fall"]].tolist() == [0.0, 0.0, 0.0]
    assert np.isnan(stats.loc["flat", "spearman"])  # no rank order among equal norms
    assert stats.loc["rising", "fall"] == 0.0 and stats.loc["rising", "spearman"] == pytest.approx(1.0)
    assert stats.loc["rising", "rise"] == pytest.approx((3.875 - 1.125) / 3.875)
    peak, low_before, low_after = 2.0 - 0.125, 2.0 - 1.375, 2.0 - 1.375
    assert stats.loc["peaked", "rise"] == pytest.approx((peak - low_before) / peak)
    assert stats.loc["peaked", "fall"] == pytest.approx((peak - low_after) / peak)
    assert (stats["bins"] == 12).all()


def test_sparse_bins_are_merged_within_half_a_decade_so_every_token_is_binned():
    frame = _profile("m", lambda x: 1.0 + x, per_bin=10, bins=4)
    near = pd.DataFrame({"matrix": "m", "drawn": [12] * 3 + [16] * 4, "norm": [99.0] * 3 + [50.0] * 4})
    binned = binned_norms(pd.concat([frame, near]))
    # Walking down from the top: 4 + 3 tokens at 10^1.08 and 10^1.20 are fewer than 10, so they join the
    # quarter-decade bin below (10^0.875), which lies within half a decade of them.
    assert binned["tokens"].tolist() == [10, 10, 10, 17]
    assert binned["norm"].tolist() == pytest.approx([1.125, 1.375, 1.625, (10 * 1.875 + 3 * 99 + 4 * 50) / 17])
    assert (binned["count_low"].iloc[-1], binned["count_high"].iloc[-1]) == (round(10**0.875), 16)
    # Tokens 1.5 decades above the rest keep bins of their own, however few: a top bin spans at most half a decade.
    far = pd.DataFrame({"matrix": "m", "drawn": [100000] * 3 + [400000] * 4, "norm": [99.0] * 3 + [50.0] * 4})
    binned = binned_norms(pd.concat([frame, far]))
    assert binned["tokens"].tolist() == [10, 10, 10, 10, 3, 4]
    assert (np.log10(binned["count_high"]) - np.log10(binned["count_low"]) <= 0.5).all()


def test_sparse_rarest_bins_join_the_bin_above_only_within_half_a_decade():
    assert binned_norms(pd.DataFrame({"matrix": "m", "drawn": [1] * 3 + [2] * 12, "norm": 1.0}))["tokens"].tolist() == [
        15
    ]
    assert binned_norms(pd.DataFrame({"matrix": "m", "drawn": [1] * 3 + [10] * 12, "norm": 1.0}))[
        "tokens"
    ].tolist() == [3, 12]
    assert frequency_bins(np.array([1, 1, 10, 10, 10, 100]), min_tokens=2).tolist() == [0, 0, 1, 1, 1, 2]


def test_a_fall_in_only_the_most_frequent_tokens_is_seen():
    # 20 bins of 20 tokens rising with frequency, then 17 tokens at 3,220 to 41,132 occurrences whose
    # norms fall: with sparse bins dropped (the old rule) the profile only rose.
    rising = _profile("m", lambda x: 1.0 + 0.2 * x, per_bin=20, bins=14)
    top = pd.DataFrame({"matrix": "m", "drawn": np.geomspace(3220, 41132, 17).round().astype(int), "norm": 0.9})
    stats = shape_stats(pd.concat([rising, top])).set_index("matrix")
    assert stats.loc["m", "fall"] > 0.3
    assert stats.loc["m", "peak_count"] < 3220
    assert binned_norms(pd.concat([rising, top]))["tokens"].sum() == len(rising) + 17


def test_drift_from_initial_norms_catches_a_uniform_growth():
    frame = _profile("m", lambda x: 1.0).assign(initial_norm=0.5)  # flat now, but twice its step-0 norm
    stats = shape_stats(frame).set_index("matrix")
    assert stats.loc["m", "spread"] == 0.0
    assert stats.loc["m", "drift"] == pytest.approx(1.0)
    assert np.isnan(shape_stats(_profile("m", lambda x: 1.0)).loc[0, "drift"])

import numpy as np
import pandas as pd
import pytest
import torch

from tying.embeddings import Embeddings
from tying.errors import PipelineError
from tying.norm_frequency import binned_norms, norm_frequency_frame, shape_stats

TOKENS = ("a", "b", "c", "d")


def test_join_of_norms_and_counts():
    inp = torch.tensor([[3.0, 4.0], [1.0, 0.0], [0.0, 2.0], [0.0, 0.0]])
    out = 2 * inp
    tied = torch.tensor([[1.0, 1.0], [0.0, 1.0], [0.0, 0.0], [6.0, 8.0]])
    counts = pd.DataFrame({"token_id": [0, 2, 0], "token": ["a", "c", "a"], "count": [5, 7, 1]})
    frame = norm_frequency_frame(Embeddings(inp, out, False, TOKENS), Embeddings(tied, tied, True, TOKENS), counts)
    assert list(frame.columns) == ["matrix", "token_id", "count", "norm", "n_tokens"]
    assert frame["matrix"].unique().tolist() == ["untied_input", "untied_output", "tied"]
    by = frame.set_index(["matrix", "token_id"])
    assert by.loc["untied_input", "count"].tolist() == [6, 7]  # repeated ids add up; unseen ones are left out
    assert by.loc["untied_input", "norm"].tolist() == pytest.approx([5.0, 2.0])
    assert by.loc["untied_output", "norm"].tolist() == pytest.approx([10.0, 4.0])
    assert by.loc["tied", "norm"].tolist() == pytest.approx([2 ** 0.5, 0.0])
    assert (frame["n_tokens"] == 2).all()
    every = norm_frequency_frame(Embeddings(inp, out, False, TOKENS), Embeddings(tied, tied, True, TOKENS), counts,
                                 min_count=0).set_index(["matrix", "token_id"])
    assert every.loc["untied_input", "count"].tolist() == [6, 0, 7, 0]


def test_counts_outside_the_vocabulary_are_errors():
    e = Embeddings(torch.ones(4, 2), torch.ones(4, 2), False, TOKENS)
    t = Embeddings(torch.ones(4, 2), torch.ones(4, 2), True, TOKENS)
    with pytest.raises(PipelineError, match="outside the vocabulary"):
        norm_frequency_frame(e, t, pd.DataFrame({"token_id": [4], "token": ["?"], "count": [1]}))


def _profile(name, norm_of_log_count, per_bin=10, bins=12):
    """`per_bin` tokens in each of `bins` quarter-decade bins from count 1; norm = f(bin centre)."""
    log_count = np.repeat(0.25 * np.arange(bins) + 0.125, per_bin)
    return pd.DataFrame({"matrix": name, "count": np.round(10 ** log_count).astype(int),
                         "norm": [norm_of_log_count(x) for x in log_count]})


def test_shape_stats_flat_rising_and_rise_then_fall():
    frame = pd.concat([
        _profile("flat", lambda x: 1.0),
        _profile("rising", lambda x: 1.0 + x),
        _profile("peaked", lambda x: 2.0 - abs(x - 1.5)),  # peak at 10^1.5, 2.0; ends at 0.625 and 0.625 + ...
        pd.DataFrame({"matrix": ["flat"], "count": [0], "norm": [50.0]}),  # an unseen token is left out
    ])
    stats = shape_stats(frame).set_index("matrix")
    assert list(stats.columns) == ["bins", "spread", "rise", "fall", "spearman"]
    assert stats.loc["flat", ["spread", "rise", "fall"]].tolist() == [0.0, 0.0, 0.0]
    assert np.isnan(stats.loc["flat", "spearman"])  # no rank order among equal norms
    assert stats.loc["rising", "fall"] == 0.0 and stats.loc["rising", "spearman"] == pytest.approx(1.0)
    assert stats.loc["rising", "rise"] == pytest.approx((3.875 - 1.125) / 3.875)
    peak, low_before, low_after = 2.0 - 0.125, 2.0 - 1.375, 2.0 - 1.375
    assert stats.loc["peaked", "rise"] == pytest.approx((peak - low_before) / peak)
    assert stats.loc["peaked", "fall"] == pytest.approx((peak - low_after) / peak)
    assert (stats["bins"] == 12).all()


def test_bins_with_too_few_tokens_are_dropped():
    frame = _profile("m", lambda x: 1.0 + x, per_bin=10, bins=4)
    sparse = pd.DataFrame({"matrix": "m", "count": [100000] * 3, "norm": [99.0] * 3})  # 3 tokens in a far bin
    binned = binned_norms(pd.concat([frame, sparse]))
    assert binned["tokens"].tolist() == [10, 10, 10, 10]
    assert binned["norm"].tolist() == pytest.approx([1.125, 1.375, 1.625, 1.875])

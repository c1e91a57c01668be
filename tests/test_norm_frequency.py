import numpy as np
import pandas as pd
import pytest
import torch

from tying.embeddings import Embeddings
from tying.errors import PipelineError
from tying.norm_frequency import norm_frequency_frame, shape_stats

TOKENS = ("a", "b", "c", "d")


def test_join_of_norms_and_counts():
    inp = torch.tensor([[3.0, 4.0], [1.0, 0.0], [0.0, 2.0], [0.0, 0.0]])
    out = 2 * inp
    tied = torch.tensor([[1.0, 1.0], [0.0, 1.0], [0.0, 0.0], [6.0, 8.0]])
    counts = pd.DataFrame({"token_id": [0, 2, 0], "token": ["a", "c", "a"], "count": [5, 7, 1]})
    frame = norm_frequency_frame(Embeddings(inp, out, False, TOKENS), Embeddings(tied, tied, True, TOKENS), counts)
    assert list(frame.columns) == ["matrix", "token_id", "count", "norm"]
    assert frame["matrix"].unique().tolist() == ["untied_input", "untied_output", "tied"]
    by = frame.set_index(["matrix", "token_id"])
    assert by.loc["untied_input", "count"].tolist() == [6, 0, 7, 0]  # repeated ids add up; absent ones are 0
    assert by.loc["untied_input", "norm"].tolist() == pytest.approx([5.0, 1.0, 2.0, 0.0])
    assert by.loc["untied_output", "norm"].tolist() == pytest.approx([10.0, 2.0, 4.0, 0.0])
    assert by.loc["tied", "norm"].tolist() == pytest.approx([2 ** 0.5, 1.0, 0.0, 10.0])


def test_counts_outside_the_vocabulary_are_errors():
    e = Embeddings(torch.ones(4, 2), torch.ones(4, 2), False, TOKENS)
    t = Embeddings(torch.ones(4, 2), torch.ones(4, 2), True, TOKENS)
    with pytest.raises(PipelineError, match="outside the vocabulary"):
        norm_frequency_frame(e, t, pd.DataFrame({"token_id": [4], "token": ["?"], "count": [1]}))


def test_shape_stats_flat_rising_and_unseen_tokens():
    count = np.array([0, 1, 10, 100, 1000, 10000])
    frame = pd.concat([
        pd.DataFrame({"matrix": "flat", "count": count, "norm": [9.0, 1.0, 1.0, 1.0, 1.0, 1.0]}),
        pd.DataFrame({"matrix": "rising", "count": count, "norm": [9.0, 1.0, 2.0, 3.0, 4.0, 5.0]}),
        pd.DataFrame({"matrix": "falling", "count": count, "norm": [0.0, 5.0, 4.0, 3.0, 2.0, 1.0]}),
    ])
    stats = shape_stats(frame).set_index("matrix")
    assert list(shape_stats(frame).columns) == ["matrix", "spearman", "spread"]
    assert stats.loc["flat", "spread"] == 0.0  # the count-0 token is left out
    assert np.isnan(stats.loc["flat", "spearman"])  # no rank order among equal norms
    assert stats.loc["rising", "spearman"] == pytest.approx(1.0)
    assert stats.loc["falling", "spearman"] == pytest.approx(-1.0)
    assert stats.loc["rising", "spread"] == pytest.approx((4.0 - 2.0) / 3.0)

import math

import pytest
import torch

from tying.checkpoints.embeddings import Embeddings
from tying.errors import PipelineError
from tying.metrics.evolution import evolution_frames

TOKENS = tuple(str(i) for i in range(50))


def checkpoint(inp, out):
    return Embeddings(inp, out, False, TOKENS)


def test_identical_checkpoints_have_drift_and_change_one():
    e = checkpoint(torch.randn(50, 8), torch.randn(50, 8))
    frame = evolution_frames([(0, e), (100, e), (200, e)])[0]
    assert list(frame.columns) == ["matrix", "step", "drift", "change", "n_tokens"]
    assert (frame["n_tokens"] == 50).all()
    assert frame["drift"].tolist() == pytest.approx([1.0] * 6)
    assert math.isnan(frame.loc[0, "change"]) and math.isnan(frame.loc[3, "change"])
    assert frame["change"].dropna().tolist() == pytest.approx([1.0] * 4)


def test_known_drift_and_change_per_matrix():
    # Rows are unit vectors e0 rotated by angle a: cos to the start = cos(a).
    def rows(angle):
        return torch.tensor([[math.cos(angle), math.sin(angle)]]).repeat(50, 1)

    steps = [(0, 0.0, 0.0), (10, 0.0, 0.5), (20, 0.0, 1.2)]  # input still; output turns
    frame = evolution_frames((s, checkpoint(rows(a_in), rows(a_out))) for s, a_in, a_out in steps)[0]
    out = frame[frame["matrix"] == "output"].set_index("step")
    assert out["drift"].tolist() == pytest.approx([1.0, math.cos(0.5), math.cos(1.2)], abs=1e-6)
    assert out.loc[20, "change"] == pytest.approx(math.cos(0.7), abs=1e-6)
    assert frame[frame["matrix"] == "input"]["drift"].tolist() == pytest.approx([1.0] * 3)


def test_out_of_order_or_mismatched_checkpoints_are_errors():
    e = checkpoint(torch.randn(50, 8), torch.randn(50, 8))
    with pytest.raises(PipelineError, match="increasing step"):
        evolution_frames([(10, e), (0, e)])[0]
    other = Embeddings(torch.randn(40, 8), torch.randn(40, 8), False, TOKENS[:40])
    with pytest.raises(PipelineError, match="differs"):
        evolution_frames([(0, e), (10, other)])[0]

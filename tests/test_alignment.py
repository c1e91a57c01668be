import pytest
import torch

from tying.alignment import (
    alignment_cosines,
    alignment_frame,
    least_squares,
    procrustes,
    row_cosines,
    scaling_frame,
)
from tying.embeddings import Embeddings
from tying.errors import PipelineError


def rotation(d, seed):
    q, _ = torch.linalg.qr(torch.randn(d, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64))
    return q


def matrix(v, d, seed, shift=0.0):
    return torch.randn(v, d, generator=torch.Generator().manual_seed(seed)) + shift


def test_rotated_copy_aligns_under_orthogonal_and_linear_but_not_identity():
    s = matrix(600, 32, 0, shift=3.0)  # column offsets test the centring too
    t = (s - s.mean(0)) @ rotation(32, 1).float().T + 5.0
    cos = alignment_cosines({"rot": (s, t)})["rot"]
    assert cos["orthogonal"].mean().item() == pytest.approx(1.0, abs=1e-5)
    assert cos["linear"].mean().item() == pytest.approx(1.0, abs=1e-5)
    assert abs(cos["identity"].mean().item()) < 0.2
    assert cos["linear"].shape == (600,)


def test_procrustes_recovers_a_known_rotation():
    q = rotation(24, 2)
    s = torch.randn(300, 24, dtype=torch.float64)
    t = s @ q.T + 0.001 * torch.randn(300, 24, dtype=torch.float64)
    w = procrustes(t.T @ s)
    assert torch.allclose(w, q, atol=1e-3)
    assert torch.allclose(w.T @ w, torch.eye(24, dtype=torch.float64), atol=1e-10)


def test_procrustes_matches_the_svd_solution_on_a_singular_cross_product():
    s, t = torch.randn(5, 16, dtype=torch.float64), torch.randn(5, 16, dtype=torch.float64)
    u, _, vh = torch.linalg.svd(t.T @ s)
    w = procrustes(t.T @ s)
    assert (s @ w.T - t).norm().item() == pytest.approx((s @ (u @ vh).T - t).norm().item(), rel=1e-9)


def test_linear_map_across_widths_recovers_a_random_linear_image():
    s = matrix(500, 16, 3)
    t = s @ torch.randn(16, 40, generator=torch.Generator().manual_seed(4))
    cos = alignment_cosines({"wide": (s, t)}, maps=("linear",))["wide"]["linear"]
    assert cos.mean().item() == pytest.approx(1.0, abs=1e-5)


def test_least_squares_matches_lstsq_and_handles_a_singular_gram():
    s = torch.randn(200, 8, dtype=torch.float64)
    t = torch.randn(200, 5, dtype=torch.float64)
    expected = torch.linalg.lstsq(s, t).solution
    assert torch.allclose(least_squares(s.T @ s, s.T @ t), expected, atol=1e-10)
    s2 = torch.cat([s, s[:, :1]], dim=1)  # a repeated column: singular Gram
    m = least_squares(s2.T @ s2, s2.T @ t)
    assert torch.allclose(s2 @ m, s @ expected, atol=1e-8)


def test_identity_and_orthogonal_refuse_mismatched_widths():
    with pytest.raises(PipelineError, match="equal widths"):
        alignment_cosines({"x": (torch.randn(50, 4), torch.randn(50, 6))})


def test_unknown_map_is_a_pipeline_error():
    with pytest.raises(PipelineError, match="unknown map"):
        alignment_cosines({"x": (torch.randn(50, 4), torch.randn(50, 4))}, maps=("affine",))


def test_row_cosines_known_values():
    a = torch.tensor([[1.0, 0.0], [1.0, 1.0], [0.0, 0.0]])
    b = torch.tensor([[2.0, 0.0], [-1.0, -1.0], [1.0, 0.0]])
    assert row_cosines(a, b).tolist() == pytest.approx([1.0, -1.0, 0.0])


def pair(v=400, d=12, tokens=None):
    """An untied pair whose output is a rotation of the tied matrix and input unrelated."""
    tokens = tokens or tuple(f"t{i}" for i in range(v))
    tied_m = matrix(v, d, 10)
    untied = Embeddings(matrix(v, d, 11), tied_m @ rotation(d, 12).float().T, False, tokens)
    return untied, Embeddings(tied_m, tied_m, True, tokens)


def test_alignment_frame_rows_and_values():
    untied, tied = pair()
    frame = alignment_frame(untied, tied)
    assert list(frame.columns) == ["comparison", "map", "token_id", "cosine"]
    assert len(frame) == 3 * 3 * 400
    means = frame.groupby(["comparison", "map"])["cosine"].mean()
    assert means["output_u->tied", "orthogonal"] == pytest.approx(1.0, abs=1e-5)
    assert means["output_u->tied", "linear"] == pytest.approx(1.0, abs=1e-5)
    assert abs(means["input_u->tied", "orthogonal"]) < 0.35  # unrelated: chance level ~ sqrt(d / V)
    assert set(frame["comparison"]) == {"input_u->output_u", "output_u->tied", "input_u->tied"}
    assert frame.loc[frame["map"] == "linear", "token_id"].tolist()[:400] == list(range(400))


def test_alignment_frame_across_widths_keeps_linear_only_where_widths_differ():
    untied, tied = pair()
    wide = tied.input @ torch.randn(12, 20, generator=torch.Generator().manual_seed(5))
    # The tied model knows the untied model's tokens 100..399 only, in another order.
    order = torch.randperm(300, generator=torch.Generator().manual_seed(6)) + 100
    tied_other = Embeddings(wide[order], wide[order], True, tuple(untied.tokens[i] for i in order.tolist()))
    frame = alignment_frame(untied, tied_other)
    maps = frame.groupby("comparison")["map"].unique().map(set)
    assert maps["output_u->tied"] == maps["input_u->tied"] == {"linear"}
    assert maps["input_u->output_u"] == {"identity", "orthogonal", "linear"}
    assert sorted(frame["token_id"].unique().tolist()) == list(range(100, 400))
    means = frame.groupby("comparison")["cosine"].mean()
    assert means["output_u->tied"] == pytest.approx(1.0, abs=1e-4)


def test_scaling_frame_against_untied_input_and_output():
    untied, tied = pair()
    frame = scaling_frame(tied, untied)
    assert frame["reference"].tolist() == ["input_u", "output_u"]
    assert frame.set_index("reference").loc["output_u", "cosine"] == pytest.approx(1.0, abs=1e-5)
    assert frame.set_index("reference").loc["input_u", "cosine"] < 0.35

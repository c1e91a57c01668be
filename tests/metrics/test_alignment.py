import math

import pytest
import torch

from tying.checkpoints.embeddings import Embeddings
from tying.errors import PipelineError
from tying.metrics.alignment import (
    MAPS,
    alignment_cosines,
    alignment_frame,
    least_squares,
    procrustes,
    row_cosines,
    scaling_frame,
)


def rotation(d, seed):
    q, _ = torch.linalg.qr(torch.randn(d, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64))
    return q


def matrix(v, d, seed, shift=0.0):
    return torch.randn(v, d, generator=torch.Generator().manual_seed(seed)) + shift


def test_rotated_copy_aligns_under_orthogonal_and_linear_but_not_identity():
    s = matrix(600, 32, 0, shift=3.0)  # column offsets test the centring too
    t = (s - s.mean(0)) @ rotation(32, 1).float().T + 5.0
    cos = alignment_cosines({"rot": (s, t)})[0]["rot", "in_sample", "true"]
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


@pytest.mark.parametrize("condition", [1e3, 1e6, 1e9])
def test_procrustes_matches_the_svd_solution_on_ill_conditioned_cross_products(condition):
    g = torch.Generator().manual_seed(5)
    u, _ = torch.linalg.qr(torch.randn(64, 64, dtype=torch.float64, generator=g))
    v, _ = torch.linalg.qr(torch.randn(64, 64, dtype=torch.float64, generator=g))
    a = u @ torch.diag(torch.logspace(0, -math.log10(condition), 64, dtype=torch.float64)) @ v.T
    w = procrustes(a)
    assert (w - u @ v.T).abs().max() < 1e-6
    assert (w.T @ w - torch.eye(64, dtype=torch.float64)).abs().max() <= 1e-6


def test_held_out_identity_scores_do_not_depend_on_the_other_maps_asked_for():
    s, t = matrix(200, 8, 6), matrix(200, 8, 7, shift=1.0)
    alone, _ = alignment_cosines({"c": (s, t)}, maps=("identity",), held_out=0.2)
    together, _ = alignment_cosines({"c": (s, t)}, maps=MAPS, held_out=0.2)
    for scored in ("in_sample", "held_out"):
        torch.testing.assert_close(alone["c", scored, "true"]["identity"], together["c", scored, "true"]["identity"])


def test_uncentred_identity_is_the_raw_cosine_and_the_centred_one_is_not():
    # A shared offset of every row makes raw cosines high whatever the rows' directions.
    s, t = matrix(300, 8, 16, shift=3.0), matrix(300, 8, 17, shift=3.0)
    cos, ids = alignment_cosines({"c": (s, t)}, maps=("identity", "identity_uncentred"), held_out=0.2)
    raw = torch.nn.functional.cosine_similarity(s, t, dim=1)
    torch.testing.assert_close(cos["c", "in_sample", "true"]["identity_uncentred"], raw)
    torch.testing.assert_close(cos["c", "held_out", "true"]["identity_uncentred"], raw[ids["held_out"]])
    assert raw.mean().item() > 0.8
    assert abs(cos["c", "in_sample", "true"]["identity"].mean().item()) < 0.1


def test_held_out_rows_are_centred_on_the_fit_rows_means():
    # Held-out rows sit at another mean than the fit rows: centring them on all rows' means (the fit
    # leaking the held-out rows) would change every held-out score. Reference: numpy-free direct fit.
    v, d, held_out = 400, 6, 0.25
    s, t = matrix(v, d, 20), matrix(v, d, 21)
    t = t + 0.5 * s @ rotation(d, 22).float()
    order = torch.randperm(v, generator=torch.Generator().manual_seed(0))
    test_rows = order[v - round(held_out * v) :]
    s[test_rows] += 2.0
    t[test_rows] -= 1.5
    cos, ids = alignment_cosines({"c": (s, t)}, maps=("identity", "orthogonal", "linear"), held_out=held_out)
    fit_rows = order[: v - round(held_out * v)]
    s64, t64 = s.double(), t.double()
    for centre_rows, should_match in ((fit_rows, True), (torch.arange(v), False)):
        ms, mt = s64[centre_rows].mean(0), t64[centre_rows].mean(0)
        sf, tf = s64[fit_rows] - s64[fit_rows].mean(0), t64[fit_rows] - t64[fit_rows].mean(0)
        u, _, vh = torch.linalg.svd(tf.T @ sf)
        maps = {
            "identity": torch.eye(d, dtype=torch.float64),
            "orthogonal": (u @ vh).T,
            "linear": torch.linalg.lstsq(sf, tf).solution,
        }
        sh, th = s64[ids["held_out"]] - ms, t64[ids["held_out"]] - mt
        for name, m in maps.items():
            expected = torch.nn.functional.cosine_similarity(sh @ m, th, dim=1).float()
            got = cos["c", "held_out", "true"][name]
            assert torch.allclose(got, expected, atol=1e-4) == should_match, name


def test_linear_map_across_widths_recovers_a_random_linear_image():
    s = matrix(500, 16, 3)
    t = s @ torch.randn(16, 40, generator=torch.Generator().manual_seed(4))
    cos, _ = alignment_cosines({"wide": (s, t)}, maps=("linear",), held_out=0.2)
    assert cos["wide", "in_sample", "true"]["linear"].mean().item() == pytest.approx(1.0, abs=1e-5)
    assert cos["wide", "held_out", "true"]["linear"].mean().item() == pytest.approx(1.0, abs=1e-5)


def test_held_out_and_chance_of_independent_gaussians():
    # Fitting d parameters per column to V rows: in sample unrelated matrices score about sqrt(d / V);
    # held out, about 0. The permuted-rows null of any pair sits at that same floor.
    v, d = 4000, 64
    s, t = matrix(v, d, 7), matrix(v, d, 8)
    cos, ids = alignment_cosines({"x": (s, t), "same": (s, s @ rotation(d, 9).float())}, held_out=0.2, null=True)
    floor = (d / v) ** 0.5
    assert cos["x", "in_sample", "true"]["linear"].mean().item() == pytest.approx(floor, rel=0.1)
    assert abs(cos["x", "held_out", "true"]["linear"].mean().item()) < 0.02
    assert abs(cos["x", "held_out", "true"]["orthogonal"].mean().item()) < 0.02
    for pair in ("x", "same"):
        assert cos[pair, "in_sample", "permuted"]["linear"].mean().item() == pytest.approx(floor, rel=0.1)
        assert abs(cos[pair, "held_out", "permuted"]["linear"].mean().item()) < 0.02
    assert cos["same", "held_out", "true"]["orthogonal"].mean().item() == pytest.approx(1.0, abs=1e-5)
    assert len(ids["held_out"]) == 800 and ids["held_out"].unique().numel() == 800
    assert torch.equal(ids["in_sample"], torch.arange(v))


def test_in_sample_scores_do_not_depend_on_the_held_out_split():
    s, t = matrix(300, 8, 10), matrix(300, 8, 11)
    plain, _ = alignment_cosines({"x": (s, t)})
    split, _ = alignment_cosines({"x": (s, t)}, held_out=0.2, null=True, seed=5)
    for name in ("identity", "orthogonal", "linear"):
        assert torch.allclose(plain["x", "in_sample", "true"][name], split["x", "in_sample", "true"][name], atol=1e-5)


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
    assert list(frame.columns) == [
        "comparison",
        "map",
        "scored",
        "target",
        "token_id",
        "cosine",
        "n_tokens",
        "cross_tokenizer",
    ]
    assert len(frame) == 3 * 4 * 2 * (400 + 80)
    assert (frame["n_tokens"] == 400).all() and not frame["cross_tokenizer"].any()
    true = frame[frame["target"] == "true"]
    means = true.groupby(["scored", "comparison", "map"])["cosine"].mean()
    for scored in ("in_sample", "held_out"):
        assert means[scored, "output_u->tied", "orthogonal"] == pytest.approx(1.0, abs=1e-5)
        assert means[scored, "output_u->tied", "linear"] == pytest.approx(1.0, abs=1e-5)
    assert abs(means["in_sample", "input_u->tied", "orthogonal"]) < 0.35  # unrelated: ~ sqrt(d / V)
    assert abs(means["held_out", "input_u->tied", "linear"]) < 0.15
    chance = frame[frame["target"] == "permuted"].groupby(["scored", "comparison"])["cosine"].mean()
    assert abs(chance["held_out", "output_u->tied"]) < 0.15  # permuting the rows destroys the copy
    assert set(frame["comparison"]) == {"input_u->output_u", "output_u->tied", "input_u->tied"}
    in_sample = frame[(frame["map"] == "linear") & (frame["scored"] == "in_sample") & (frame["target"] == "true")]
    assert in_sample["token_id"].tolist()[:400] == list(range(400))


def test_alignment_frame_keeps_only_the_tokens_asked_for():
    untied, tied = pair()
    keep = torch.arange(0, 400, 2)
    frame = alignment_frame(untied, tied, keep=keep)
    assert (frame["n_tokens"] == 200).all()
    assert set(frame["token_id"]) <= set(keep.tolist())
    in_sample = frame[(frame["scored"] == "in_sample") & (frame["target"] == "true") & (frame["map"] == "linear")]
    assert in_sample.groupby("comparison").size().tolist() == [200, 200, 200]


def test_alignment_frame_across_widths_keeps_linear_only_where_widths_differ():
    untied, tied = pair()
    wide = tied.input @ torch.randn(12, 20, generator=torch.Generator().manual_seed(5))
    # The tied model knows the untied model's tokens 100..399 only, in another order.
    order = torch.randperm(300, generator=torch.Generator().manual_seed(6)) + 100
    tied_other = Embeddings(wide[order], wide[order], True, tuple(untied.tokens[i] for i in order.tolist()))
    frame = alignment_frame(untied, tied_other)
    maps = frame.groupby("comparison")["map"].unique().map(set)
    assert maps["output_u->tied"] == maps["input_u->tied"] == {"linear"}
    assert maps["input_u->output_u"] == set(MAPS)
    assert sorted(frame["token_id"].unique().tolist()) == list(range(100, 400))
    assert (frame["n_tokens"] == 300).all() and frame["cross_tokenizer"].all()
    means = frame[frame["target"] == "true"].groupby(["scored", "comparison"])["cosine"].mean()
    assert means["in_sample", "output_u->tied"] == pytest.approx(1.0, abs=1e-4)
    assert means["held_out", "output_u->tied"] == pytest.approx(1.0, abs=1e-4)
    with pytest.raises(PipelineError, match="share one vocabulary"):
        alignment_frame(untied, tied_other, keep=[1, 2, 3])


def test_scaling_frame_against_untied_input_and_output():
    untied, tied = pair()
    frame = scaling_frame(tied, untied).set_index(["reference", "scored", "target"])["cosine"]
    assert frame["output_u", "in_sample", "true"] == pytest.approx(1.0, abs=1e-5)
    assert frame["output_u", "held_out", "true"] == pytest.approx(1.0, abs=1e-5)
    assert frame["input_u", "in_sample", "true"] < 0.35
    assert abs(frame["output_u", "held_out", "permuted"]) < 0.15

import pytest
import torch

from tying.checkpoints.embeddings import Embeddings
from tying.metrics.knn_overlap import (
    approximate_neighbours,
    knn_frame,
    nearest_neighbours,
    overlap,
    permuted_neighbours,
)


def gen(seed):
    return torch.Generator().manual_seed(seed)


def clustered(v, d, clusters, spread, seed, centres=None):
    """Rows scattered around cluster centres (shared when `centres` is given)."""
    if centres is None:
        centres = torch.randn(clusters, d, generator=gen(seed + 1000))
    labels = torch.arange(v) % clusters
    return centres[labels] + spread * torch.randn(v, d, generator=gen(seed)), centres


def test_nearest_neighbours_on_a_circle_known_answer():
    angles = torch.tensor([0.0, 0.1, 0.3, 1.0, 3.0])
    x = torch.stack([angles.cos(), angles.sin()], dim=1) * torch.tensor([[1.0], [2.0], [0.5], [3.0], [1.0]])
    nn = nearest_neighbours(x, 2, chunk=2)  # chunks cut through the rows: the self mask must follow
    assert nn.tolist() == [[1, 2], [0, 2], [1, 0], [2, 1], [3, 2]]


def test_overlap_counts_shared_neighbours():
    na = torch.tensor([[1, 2, 3], [4, 5, 6]])
    nb = torch.tensor([[3, 7, 1], [7, 8, 9]])
    assert overlap(na, nb).tolist() == pytest.approx([2 / 3, 0.0])


def test_self_overlap_is_one_and_unrelated_overlap_is_chance():
    v, d, k = 2000, 64, 10
    a = torch.randn(v, d, generator=gen(0))
    b = torch.randn(v, d, generator=gen(1))
    na, nb = nearest_neighbours(a, k, chunk=512), nearest_neighbours(b, k, chunk=512)
    assert overlap(na, na).mean().item() == 1.0
    # Independent matrices: E[overlap] = k / (V - 1) = 0.0050. One token's overlap has
    # sd ~ sqrt(k / V) / k = 0.022, so the mean over V tokens has sd ~ 0.0005; 0.003 is 6 sd.
    assert overlap(na, nb).mean().item() == pytest.approx(k / (v - 1), abs=0.003)


def test_approximate_matches_exact_on_clustered_data():
    # 150 clusters of 20 tokens: every token's 10 nearest neighbours are cluster mates.
    v, d = 3000, 128
    tied, centres = clustered(v, d, 150, 0.6, seed=0)
    output_u, _ = clustered(v, d, 150, 0.6, seed=1, centres=centres)
    input_u, _ = clustered(v, d, 150, 0.6, seed=2, centres=centres.roll(1, dims=0))
    input_u[::2] = tied[::2] + 0.6 * torch.randn(v // 2, d, generator=gen(3))  # half follow the tied clusters
    tokens = tuple(str(i) for i in range(v))
    untied_e, tied_e = Embeddings(input_u, output_u, False, tokens), Embeddings(tied, tied, True, tokens)
    exact = knn_frame(untied_e, tied_e, ks=(10,)).groupby("comparison")["overlap"].mean()
    approx = (
        knn_frame(untied_e, tied_e, ks=(10,), approximate=True, sketch_dim=32, candidates=64)
        .groupby("comparison")["overlap"]
        .mean()
    )
    assert (exact - approx).abs().max() <= 0.005
    assert exact.between(0.05, 0.95).all()  # neither trivial nor chance
    recall = overlap(nearest_neighbours(tied, 10), approximate_neighbours(tied, 10, 32, 64)).mean().item()
    assert recall > 0.995


def test_knn_frame_rows_and_prefix_k():
    v, d = 500, 16
    a = torch.randn(v, d, generator=gen(3))
    tokens = tuple(str(i) for i in range(v))
    untied = Embeddings(a, torch.randn(v, d, generator=gen(4)), False, tokens)
    tied = Embeddings(a * 2.0, a * 2.0, True, tokens)  # a rescaled copy of untied input
    frame = knn_frame(untied, tied, ks=(5, 10))
    assert list(frame.columns) == [
        "comparison",
        "k",
        "token_id",
        "overlap",
        "null_overlap",
        "chance",
        "n_tokens",
        "cross_tokenizer",
    ]
    assert len(frame) == 6 * v
    got = frame.groupby(["comparison", "k"])[["overlap", "null_overlap", "chance"]].mean()
    assert got.loc[("tied_vs_input_u", 5), "overlap"] == 1.0 and got.loc[("tied_vs_input_u", 10), "overlap"] == 1.0
    assert got.loc[("tied_vs_output_u", 10), "overlap"] == pytest.approx(10 / (v - 1), abs=0.02)
    # Permuting the rows of an exact copy brings its overlap down to chance, k / (n - 1).
    assert got.loc[("tied_vs_input_u", 10), "null_overlap"] == pytest.approx(10 / (v - 1), abs=0.02)
    assert got.loc[("tied_vs_input_u", 10), "chance"] == pytest.approx(10 / (v - 1))
    # Two independent Gaussian matrices share neighbours at chance only.
    assert got.loc[("input_u_vs_output_u", 5), "overlap"] == pytest.approx(5 / (v - 1), abs=0.01)
    kept = knn_frame(untied, tied, ks=(5,), keep=torch.arange(0, v, 5))
    assert (kept["n_tokens"] == 100).all() and kept["token_id"].max() == 495
    assert kept["chance"].iloc[0] == pytest.approx(5 / 99)


def test_permuted_neighbours_are_the_neighbours_of_the_permuted_matrix():
    x = torch.randn(300, 8, generator=gen(7))
    pi = torch.randperm(300, generator=torch.Generator().manual_seed(3))
    direct = nearest_neighbours(x[pi], 5)
    assert torch.equal(permuted_neighbours(nearest_neighbours(x, 5), seed=3).sort(1).values, direct.sort(1).values)


@pytest.mark.parametrize("v,chunk", [(97, 16), (64, 64), (50, 7)])
def test_exact_neighbours_match_a_full_similarity_top_k(v, chunk):
    x = torch.randn(v, 12, generator=torch.Generator().manual_seed(v))
    xn = x / x.norm(dim=1, keepdim=True)
    sims = xn @ xn.T
    sims.fill_diagonal_(float("-inf"))
    assert torch.equal(nearest_neighbours(x, 5, chunk=chunk), sims.topk(5, dim=1).indices)

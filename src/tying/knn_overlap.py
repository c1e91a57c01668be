"""KNN@k overlap between embedding matrices (Table 5).

For each token, its k nearest neighbours by cosine (itself excluded) in matrix A and in
matrix B; overlap = |N_A ∩ N_B| / k, averaged over tokens. Needs no map, so it works
across hidden sizes. Neighbour lists are computed once per matrix and shared by every
comparison that uses it.
"""
import warnings

import pandas as pd
import torch

from tying.embeddings import common_vocabulary

# (name, A, B) over the matrices of an (untied, tied) pair.
COMPARISONS = (
    ("tied_vs_input_u", "tied", "input_u"),
    ("tied_vs_output_u", "tied", "output_u"),
    ("input_u_vs_output_u", "input_u", "output_u"),
)
CHUNK = 1024


def unit_rows(x, eps=1e-12):
    """(V, d) -> (V, d) rows scaled to unit L2 norm (zero rows stay zero)."""
    return x / x.norm(dim=1, keepdim=True).clamp_min(eps)


def nearest_neighbours(x, k, chunk=CHUNK):
    """Exact k nearest neighbours of every row by cosine, itself excluded.

    x: (V, d). Returns (V, k) long, each row ordered from most to least similar.
    The similarity matrix is symmetric, so only its upper block triangle is computed: a block
    of rows against every later column gives those rows their candidates (top-k along rows)
    and those columns theirs (top-k along columns); running top-k lists merge them.
    """
    xn = unit_rows(x)
    v = xn.shape[0]
    best_val = torch.full((v, k), float("-inf"))
    best_idx = torch.zeros(v, k, dtype=torch.long)
    buf = torch.empty(min(chunk, v) * v)
    for start in range(0, v, chunk):
        rows = xn[start:start + chunk]
        n = rows.shape[0]
        sims = torch.mm(rows, xn[start:].T, out=buf[: n * (v - start)].view(n, v - start))
        sims[torch.arange(n), torch.arange(n)] = float("-inf")
        vals, idx = sims.topk(min(k, v - start), dim=1)
        _merge(best_val, best_idx, slice(start, start + n), vals, idx + start, k)
        if v - start - n:
            vals, idx = sims[:, n:].T.topk(min(k, n), dim=1)
            _merge(best_val, best_idx, slice(start + n, v), vals, idx + start, k)
    return best_idx


def _merge(best_val, best_idx, where, vals, idx, k):
    """Fold candidates (vals, idx) (m, c) into the running top-k lists of rows `where`."""
    all_val = torch.cat([best_val[where], vals], dim=1)
    all_idx = torch.cat([best_idx[where], idx], dim=1)
    top_val, pos = all_val.topk(k, dim=1)
    best_val[where] = top_val
    best_idx[where] = all_idx.gather(1, pos)


def approximate_neighbours(x, k, sketch_dim=256, candidates=64, power_iters=2, seed=0, chunk=CHUNK):
    """Approximate k nearest neighbours by cosine, itself excluded.

    Sketch: the unit rows projected onto `sketch_dim` directions found by a random Gaussian
    projection refined by `power_iters` subspace iterations (randomized PCA: the projection
    that best keeps the rows' inner products). Candidates: each row's `candidates` largest
    sketch inner products; they are re-ranked by their exact cosine, computed only for those
    pairs (a sampled sparse product, no gathered copies of the rows).
    x: (V, d). Returns (V, k) long, ordered most to least similar.
    """
    xn = unit_rows(x)
    v, d = xn.shape
    basis = torch.randn(d, min(sketch_dim, d), generator=torch.Generator().manual_seed(seed))
    for _ in range(power_iters):
        basis, _ = torch.linalg.qr(xn.T @ (xn @ basis))
    sketch = xn @ basis
    candidates = min(candidates, v - 1)
    out = torch.empty(v, k, dtype=torch.long)
    buf = torch.empty(min(chunk, v), v)
    for start in range(0, v, chunk):
        rows = sketch[start:start + chunk]
        n = rows.shape[0]
        cand = _top_excluding_self(torch.mm(rows, sketch.T, out=buf[:n]), start, candidates).sort(dim=1).values
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
            pattern = torch.sparse_csr_tensor(
                torch.arange(0, n * candidates + 1, candidates), cand.flatten(), torch.zeros(n * candidates),
                size=(n, v), check_invariants=False,
            )
            exact = torch.sparse.sampled_addmm(pattern, xn[start:start + n], xn.T).values().view(n, candidates)
        out[start:start + n] = cand.gather(1, exact.topk(k, dim=1).indices)
    return out


def overlap(na, nb):
    """Per-token overlap |N_A ∩ N_B| / k of two (V, k) neighbour lists -> (V,) float."""
    merged = torch.cat([na, nb], dim=1).sort(dim=1).values
    return (merged[:, 1:] == merged[:, :-1]).sum(1) / na.shape[1]


def knn_frame(untied, tied, ks=(10,), approximate=False, **options):
    """Tidy mean KNN@k overlaps of the three comparisons of an (untied, tied) Embeddings pair.

    Pairs with different tokenizers are compared on their shared token strings. Neighbours
    are found once per matrix at max(ks) and truncated for smaller k. `approximate` selects
    approximate_neighbours (options: sketch_dim, candidates, power_iters, seed); else exact.
    Returns columns comparison, k, overlap.
    """
    untied, tied, _ = common_vocabulary(untied, tied)
    find = approximate_neighbours if approximate else nearest_neighbours
    k_max = max(ks)
    neighbours = {
        "input_u": find(untied.input, k_max, **options),
        "output_u": find(untied.output, k_max, **options),
        "tied": find(tied.input, k_max, **options),
    }
    rows = [
        {"comparison": name, "k": k, "overlap": float(overlap(neighbours[a][:, :k], neighbours[b][:, :k]).mean())}
        for name, a, b in COMPARISONS
        for k in ks
    ]
    return pd.DataFrame(rows)


def _top_excluding_self(sims, start, k):
    """Indices (n, k) of the k largest of each row of sims (n, V), masking column start + row."""
    n = sims.shape[0]
    diag = torch.arange(n)
    sims[diag, start + diag] = float("-inf")
    return sims.topk(k, dim=1).indices

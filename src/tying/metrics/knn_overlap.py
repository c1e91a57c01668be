"""KNN@k overlap between embedding matrices (Table 5).

For each token, its k nearest neighbours by cosine (itself excluded) in matrix A and in
matrix B; overlap = |N_A ∩ N_B| / k, averaged over tokens. Needs no map, so it works
across hidden sizes. Neighbour lists are computed once per matrix and shared by every
comparison that uses it.

Chance: unrelated matrices overlap k / (n - 1) on average over n tokens. The permuted-rows
null pairs token i of A with token pi(i) of B for a seeded permutation pi; its neighbours come
from B's lists relabelled (pi^-1(N_B(pi(i)))), so the null costs no second neighbour search.
"""

import warnings

import pandas as pd
import torch

from tying.checkpoints.embeddings import compared_rows, one_tokenizer
from tying.errors import PipelineError

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
        rows = xn[start : start + chunk]
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
        rows = sketch[start : start + chunk]
        n = rows.shape[0]
        cand = _top_excluding_self(torch.mm(rows, sketch.T, out=buf[:n]), start, candidates).sort(dim=1).values
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
            pattern = torch.sparse_csr_tensor(
                torch.arange(0, n * candidates + 1, candidates),
                cand.flatten(),
                torch.zeros(n * candidates),
                size=(n, v),
                check_invariants=False,
            )
            exact = torch.sparse.sampled_addmm(pattern, xn[start : start + n], xn.T).values().view(n, candidates)
        out[start : start + n] = cand.gather(1, exact.topk(k, dim=1).indices)
    return out


def overlap(na, nb):
    """Per-token overlap |N_A ∩ N_B| / k of two (V, k) neighbour lists -> (V,) float."""
    merged = torch.cat([na, nb], dim=1).sort(dim=1).values
    return (merged[:, 1:] == merged[:, :-1]).sum(1) / na.shape[1]


def permuted_neighbours(neighbours, seed=0):
    """Neighbour lists (V, k) of the matrix whose row i is row pi(i) of the original (pi seeded)."""
    pi = torch.randperm(neighbours.shape[0], generator=torch.Generator().manual_seed(seed))
    return pi.argsort()[neighbours[pi]]


def knn_frame(untied, tied, ks=(10,), approximate=False, keep=None, null_seed=1, **options):
    """Tidy per-token KNN@k overlaps of the three comparisons of an (untied, tied) Embeddings pair.

    Pairs with different tokenizers are compared on their shared token strings; keep: token
    ids (of a shared vocabulary) to restrict to. Neighbours are found once per matrix at
    max(ks) and truncated for smaller k. `approximate` selects approximate_neighbours
    (options: sketch_dim, candidates, power_iters, seed); else exact. null_overlap is the
    overlap with B's rows permuted; chance is k / (n - 1).
    Returns columns comparison, k, token_id, overlap, null_overlap, chance, n_tokens, cross_tokenizer.
    """
    cross_tokenizer = not one_tokenizer(untied, tied)
    untied, tied, ids = compared_rows(untied, tied, keep)
    n, k_max = len(ids), max(ks)
    if n <= k_max:
        raise PipelineError(f"KNN@{k_max} needs more than {k_max} tokens, got {n}")
    find = approximate_neighbours if approximate else nearest_neighbours
    neighbours = {
        "input_u": find(untied.input, k_max, **options),
        "output_u": find(untied.output, k_max, **options),
        "tied": find(tied.input, k_max, **options),
    }
    frames = []
    for name, a, b in COMPARISONS:
        null_b = permuted_neighbours(neighbours[b], null_seed)
        for k in ks:
            frames.append(
                pd.DataFrame(
                    {
                        "comparison": name,
                        "k": k,
                        "token_id": ids.numpy(),
                        "overlap": overlap(neighbours[a][:, :k], neighbours[b][:, :k]).numpy(),
                        "null_overlap": overlap(neighbours[a][:, :k], null_b[:, :k]).numpy(),
                        "chance": k / (n - 1),
                        "n_tokens": n,
                    }
                )
            )
    return pd.concat(frames, ignore_index=True).assign(cross_tokenizer=cross_tokenizer)


def _top_excluding_self(sims, start, k):
    """Indices (n, k) of the k largest of each row of sims (n, V), masking column start + row."""
    n = sims.shape[0]
    diag = torch.arange(n)
    sims[diag, start + diag] = float("-inf")
    return sims.topk(k, dim=1).indices

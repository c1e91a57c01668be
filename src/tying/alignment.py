"""Alignment of two embedding matrices after a fitted map (Table 1, Figure 1, Tables 2 and 6).

Both matrices are centred (column means subtracted). A map from the source S (V, d_s)
to the target T (V, d_t) is fitted and the per-token cosine between mapped S row i and
T row i is reported:

- identity: no map (d_s = d_t);
- orthogonal: Procrustes, W = U V^T from the SVD of T^T S = U diag V^T, mapped = S W^T (d_s = d_t);
- linear: least squares M = argmin ||S M - T||_F, mapped = S M (any widths).

Everything is done in row chunks from the d x d moments (T^T S and the Gram S^T S,
accumulated in float64): no centred copy, no SVD or lstsq of a V x d matrix.
"""
import pandas as pd
import torch

from tying.embeddings import common_vocabulary
from tying.errors import PipelineError

MAPS = ("identity", "orthogonal", "linear")
# (name, source, target) over the matrices of an (untied, tied) pair.
COMPARISONS = (
    ("input_u->output_u", "input_u", "output_u"),
    ("output_u->tied", "output_u", "tied"),
    ("input_u->tied", "input_u", "tied"),
)
CHUNK = 4096


def row_cosines(a, b, eps=1e-12):
    """Cosine of each row pair: (V, d), (V, d) -> (V,); 0 for a zero row."""
    return torch.linalg.vecdot(a, b) / (a.norm(dim=1) * b.norm(dim=1)).clamp_min(eps)


def column_means(x, chunk=CHUNK):
    """(V, d) -> (d,) float64 column means (float32 sums of row chunks, added in float64)."""
    return sum(x[start:start + chunk].sum(0).double() for start in range(0, x.shape[0], chunk)) / x.shape[0]


def centred_products(mats, means, pairs, chunk=CHUNK):
    """Products X_i^T X_j of centred matrices, accumulated in float64 over row chunks.

    mats: (V, d_i) tensors; means: their (d_i,) float64 column means; pairs: (i, j) index
    pairs. Returns {(i, j): (d_i, d_j) float64}.
    """
    out = {(i, j): torch.zeros(mats[i].shape[1], mats[j].shape[1], dtype=torch.float64) for i, j in pairs}
    used = sorted({k for pair in pairs for k in pair})
    for start in range(0, mats[0].shape[0], chunk):
        rows = {k: mats[k][start:start + chunk] - means[k].float() for k in used}
        for i, j in pairs:
            out[i, j] += (rows[i].T @ rows[j]).double()
    return out


def procrustes(cross_ts, max_condition=1e5):
    """Orthogonal W (d, d) minimising ||S W^T - T||_F, from cross_ts = T^T S (d, d) float64.

    W = U V^T from the SVD A = U S V^T of A = T^T S, i.e. its orthogonal polar factor, computed
    as A (A^T A)^{-1/2} from one symmetric eigendecomposition (about twice as fast as a d x d SVD
    with vectors on CPU). When A's condition number exceeds `max_condition`, squaring it would
    cost accuracy, and the SVD is used.
    """
    evals, evecs = torch.linalg.eigh(cross_ts.T @ cross_ts)
    if evals[0] <= evals[-1] / max_condition**2:
        u, _, vh = torch.linalg.svd(cross_ts)
        return u @ vh
    return cross_ts @ (evecs * evals.rsqrt()) @ evecs.T


def least_squares(gram_s, cross_st):
    """M (d_s, d_t) minimising ||S M - T||_F from the Gram S^T S and S^T T (float64).

    Cholesky solve of the normal equations; a pseudo-inverse when the Gram is singular.
    """
    chol, info = torch.linalg.cholesky_ex(gram_s)
    if info == 0:
        return torch.cholesky_solve(cross_st, chol)
    return torch.linalg.pinv(gram_s, hermitian=True) @ cross_st


def mapped_cosines(source, target, maps, mean_s, mean_t, chunk=CHUNK):
    """Per-token cosines of centred source rows under each map vs centred target rows.

    source: (V, d_s); target: (V, d_t); maps: {name: None (identity) or (d_s, d_t) matrix
    applied as S @ matrix}; mean_s, mean_t: column means. Returns {name: (V,) float32}.
    The fitted maps are applied as one stacked (d_s, n * d_t) product per row chunk.
    """
    fitted = [name for name, m in maps.items() if m is not None]
    stacked = torch.cat([maps[name] for name in fitted], dim=1).float() if fitted else None
    out = {name: [] for name in maps}
    for start in range(0, source.shape[0], chunk):
        s = source[start:start + chunk] - mean_s.float()
        t = target[start:start + chunk] - mean_t.float()
        mapped = dict(zip(fitted, (s @ stacked).split(t.shape[1], dim=1))) if fitted else {}
        for name in maps:
            out[name].append(row_cosines(mapped.get(name, s), t))
    return {name: torch.cat(parts) for name, parts in out.items()}


def alignment_cosines(pairs, maps=MAPS, chunk=CHUNK):
    """Per-token cosines of several (source, target) comparisons, sharing matrix moments.

    pairs: {comparison: (source (V, d_s), target (V, d_t))}, matrices given by identity may
    recur across comparisons and their moments are then computed once. identity and
    orthogonal need d_s = d_t and raise PipelineError otherwise; linear works across widths.
    Returns {comparison: {map: (V,) cosines}}; Table 1 is their means.
    """
    unknown = set(maps) - set(MAPS)
    if unknown:
        raise PipelineError(f"unknown map(s) {', '.join(sorted(unknown))}; choose from {', '.join(MAPS)}")
    mats, slot = [], {}
    for source, target in pairs.values():
        for m in (source, target):
            if id(m) not in slot:
                slot[id(m)] = len(mats)
                mats.append(m)
        if source.shape[0] != target.shape[0]:
            raise PipelineError(f"alignment needs the same token rows, got {source.shape[0]} and {target.shape[0]}")
        if source.shape[1] != target.shape[1] and set(maps) & {"identity", "orthogonal"}:
            raise PipelineError(f"identity/orthogonal maps need equal widths, got {source.shape[1]} and {target.shape[1]}")
    index = {c: (slot[id(s)], slot[id(t)]) for c, (s, t) in pairs.items()}
    needed = set()
    for i, j in index.values():
        if "orthogonal" in maps or "linear" in maps:
            needed.add((i, j))
        if "linear" in maps:
            needed.add((i, i))
    means = [column_means(m) for m in mats]
    products = centred_products(mats, means, sorted(needed), chunk)
    result = {}
    for c, (i, j) in index.items():
        fitted = {}
        for name in maps:
            if name == "identity":
                fitted[name] = None
            elif name == "orthogonal":
                fitted[name] = procrustes(products[i, j].T).T
            else:
                fitted[name] = least_squares(products[i, i], products[i, j])
        result[c] = mapped_cosines(mats[i], mats[j], fitted, means[i], means[j], chunk)
    return result


def alignment_frame(untied, tied, maps=MAPS):
    """Tidy per-token cosines of the three comparisons of an (untied, tied) Embeddings pair.

    Pairs with different tokenizers are compared on their shared token strings; token_id is
    the untied model's id. A comparison across hidden sizes gets the linear map only.
    Returns columns comparison, map, token_id, cosine.
    """
    untied, tied, ids = common_vocabulary(untied, tied)
    named = {"input_u": untied.input, "output_u": untied.output, "tied": tied.input}
    pairs = {c: (named[s], named[t]) for c, s, t in COMPARISONS}
    same = {c: p for c, p in pairs.items() if p[0].shape[1] == p[1].shape[1]}
    across = {c: p for c, p in pairs.items() if c not in same}
    found = {**(alignment_cosines(same, maps) if same else {}),
             **(alignment_cosines(across, [m for m in maps if m == "linear"]) if across else {})}
    cosines = {c: found[c] for c in pairs}
    ids = ids.numpy()
    return pd.concat(
        [
            pd.DataFrame({"comparison": c, "map": name, "token_id": ids, "cosine": cos.numpy()})
            for c, by_map in cosines.items()
            for name, cos in by_map.items()
        ],
        ignore_index=True,
    )


def scaling_frame(tied, untied):
    """Orthogonal-Procrustes mean cosine of a tied matrix against the untied E_in and E_out.

    Returns columns reference ("input_u", "output_u") and cosine (Tables 2 and 6).
    """
    untied, tied, _ = common_vocabulary(untied, tied)
    cosines = alignment_cosines(
        {"input_u": (untied.input, tied.input), "output_u": (untied.output, tied.input)}, maps=("orthogonal",)
    )
    return pd.DataFrame(
        {"reference": list(cosines), "cosine": [float(c["orthogonal"].mean()) for c in cosines.values()]}
    )

"""Alignment of two embedding matrices after a fitted map (Table 1, Figure 1, Tables 2 and 6).

Both matrices are centred (column means subtracted). A map from the source S (V, d_s)
to the target T (V, d_t) is fitted and the per-token cosine between mapped S row i and
T row i is reported:

- identity: no map (d_s = d_t);
- identity_uncentred: no map and no centring, the raw cosine (d_s = d_t): the paper's identity
  column (its authors' `compare_cross_model` centres only before the fitted maps);
- orthogonal: Procrustes, W = U V^T from the SVD of T^T S = U diag V^T, mapped = S W^T (d_s = d_t);
- linear: least squares M = argmin ||S M - T||_F, mapped = S M (any widths).

Scored in sample (fitted and scored on every token, as the paper did) and held out (fitted on
a seeded random 80% of the tokens, scored on the other 20%), each for the true target and for
a chance level: the target's rows permuted (seeded) before fitting. Fitting d parameters per
target column to V rows gives unrelated matrices an in-sample cosine of about sqrt(d / V);
held out, they score about 0.

Everything is done in row chunks from the d x d moments (T^T S and the Gram S^T S,
accumulated in float64): no centred copy, no SVD or lstsq of a V x d matrix.
"""

from dataclasses import dataclass

import pandas as pd
import torch

from tying.checkpoints.embeddings import compared_rows, one_tokenizer
from tying.errors import PipelineError

MAPS = ("identity", "identity_uncentred", "orthogonal", "linear")
UNFITTED = ("identity", "identity_uncentred")
# (name, source, target) over the matrices of an (untied, tied) pair.
COMPARISONS = (
    ("input_u->output_u", "input_u", "output_u"),
    ("output_u->tied", "output_u", "tied"),
    ("input_u->tied", "input_u", "tied"),
)
CHUNK = 4096
HELD_OUT = 0.2  # share of tokens held out for scoring
SPLIT_SEED = 0  # seeds the held-out split (SPLIT_SEED) and the null's row permutation (SPLIT_SEED + 1)


def row_cosines(a, b, eps=1e-12):
    """Cosine of each row pair: (V, d), (V, d) -> (V,); 0 for a zero row."""
    return torch.linalg.vecdot(a, b) / (a.norm(dim=1) * b.norm(dim=1)).clamp_min(eps)


def column_means(x, chunk=CHUNK):
    """(V, d) -> (d,) float64 column means (float32 sums of row chunks, added in float64)."""
    return sum(x[start : start + chunk].sum(0).double() for start in range(0, x.shape[0], chunk)) / x.shape[0]


def token_split(v, held_out=HELD_OUT, seed=SPLIT_SEED):
    """A seeded random order of the V tokens and the number fitted on: order[:n_fit] fit, the rest score.

    held_out = 0 fits and scores on every token (n_fit = V).
    """
    order = torch.randperm(v, generator=torch.Generator().manual_seed(seed))
    n_fit = v - round(held_out * v)
    if held_out and not 0 < n_fit < v:
        raise PipelineError(f"cannot hold out {held_out:.0%} of {v} tokens")
    return order, n_fit


@dataclass(frozen=True)
class _Rows:
    """A matrix read through a row index: row r is matrix[index[r]]."""

    matrix: torch.Tensor
    index: torch.Tensor

    def chunk(self, start, stop):
        return self.matrix.index_select(0, self.index[start:stop])


def _moments(views, means, pairs, bounds, chunk):
    """Per row range: float64 sums of the centred rows of every view and products X_i^T X_j.

    views: _Rows; means: their (d,) float64 column means over all rows; pairs: (i, j) index
    pairs; bounds: {part: (start, stop)}. Returns {part: (sums {i: (d_i,)}, products {(i, j): (d_i, d_j)})}.
    """
    used = range(len(views))  # every view: held-out scores centre on its fit-row mean, moments or not
    out = {}
    for part, (lo, hi) in bounds.items():
        sums = {k: torch.zeros(views[k].matrix.shape[1], dtype=torch.float64) for k in used}
        prods = {
            (i, j): torch.zeros(views[i].matrix.shape[1], views[j].matrix.shape[1], dtype=torch.float64)
            for i, j in pairs
        }
        for start in range(lo, hi, chunk):
            stop = min(start + chunk, hi)
            rows = {k: views[k].chunk(start, stop) - means[k].float() for k in used}
            for k in used:
                sums[k] += rows[k].sum(0).double()
            for i, j in pairs:
                prods[i, j] += (rows[i].T @ rows[j]).double()
        out[part] = (sums, prods)
    return out


def procrustes(cross_ts, tol=1e-6):
    """Orthogonal W (d, d) minimising ||S W^T - T||_F, from cross_ts = T^T S (d, d) float64.

    W = U V^T from the SVD A = U S V^T of A = T^T S, i.e. its orthogonal polar factor, computed
    as A (A^T A)^{-1/2} from one symmetric eigendecomposition (about twice as fast as a d x d SVD
    with vectors on CPU). Squaring A squares its condition number: the relative error of A^T A's
    small eigenvalues shows up as W^T W's distance from the identity, so the result is kept when
    that distance (largest entry) is within `tol` and the SVD is used otherwise.
    """
    evals, evecs = torch.linalg.eigh(cross_ts.T @ cross_ts)
    if evals[0] > 0:
        w = cross_ts @ (evecs * evals.rsqrt()) @ evecs.T
        gram = w.T @ w
        if (gram - torch.eye(len(gram), dtype=gram.dtype)).abs().max() <= tol:
            return w
    u, _, vh = torch.linalg.svd(cross_ts)
    return u @ vh


def least_squares(gram_s, cross_st):
    """M (d_s, d_t) minimising ||S M - T||_F from the Gram S^T S and S^T T (float64).

    Cholesky solve of the normal equations; a pseudo-inverse when the Gram is singular.
    """
    chol, info = torch.linalg.cholesky_ex(gram_s)
    if info == 0:
        return torch.cholesky_solve(cross_st, chol)
    return torch.linalg.pinv(gram_s, hermitian=True) @ cross_st


def mapped_cosines(source, target, maps, mean_s, mean_t, start, stop, chunk=CHUNK):
    """Per-token cosines of centred source rows under each map vs centred target rows.

    source, target: _Rows read over rows [start, stop); maps: {name: None (identity, or
    identity_uncentred on the raw rows) or (d_s, d_t) matrix applied as S @ matrix}; mean_s, mean_t:
    the column means to centre with.
    Returns {name: (stop - start,) float32}. The fitted maps are applied as one stacked
    (d_s, n * d_t) product per row chunk.
    """
    fitted = [name for name, m in maps.items() if m is not None]
    stacked = torch.cat([maps[name] for name in fitted], dim=1).float() if fitted else None
    out = {name: [] for name in maps}
    for lo in range(start, stop, chunk):
        hi = min(lo + chunk, stop)
        s_raw, t_raw = source.chunk(lo, hi), target.chunk(lo, hi)
        s, t = s_raw - mean_s.float(), t_raw - mean_t.float()
        mapped = dict(zip(fitted, (s @ stacked).split(t.shape[1], dim=1))) if fitted else {}
        for name in maps:
            out[name].append(
                row_cosines(s_raw, t_raw) if name == "identity_uncentred" else row_cosines(mapped.get(name, s), t)
            )
    return {name: torch.cat(parts) for name, parts in out.items()}


def _fit(maps, cross, gram):
    """{map: None (unfitted) or (d_s, d_t) matrix} from the centred S^T T (`cross`) and S^T S (`gram`)."""
    fitted = {}
    for name in maps:
        if name in UNFITTED:
            fitted[name] = None
        elif name == "orthogonal":
            fitted[name] = procrustes(cross.T).T
        else:
            fitted[name] = least_squares(gram, cross)
    return fitted


def alignment_cosines(pairs, maps=MAPS, held_out=0.0, null=False, seed=SPLIT_SEED, chunk=CHUNK):
    """Per-token cosines of several (source, target) comparisons, sharing matrix moments.

    pairs: {comparison: (source (V, d_s), target (V, d_t))}; a matrix given by identity may
    recur across comparisons and its moments are then computed once. The unfitted maps and
    orthogonal need d_s = d_t and raise PipelineError otherwise; linear works across widths.
    held_out > 0 adds scores of maps fitted on the other tokens (token_split); null adds the
    chance level, every comparison again with the target's rows permuted (seed + 1).
    Returns (cosines, ids): cosines {(comparison, scored, target): {map: (n,) float32}} with
    scored "in_sample" / "held_out" and target "true" / "permuted"; ids {scored: (n,) long}, the
    row of each score (in-sample: every row in order; held-out: the held-out rows, ascending).
    """
    unknown = set(maps) - set(MAPS)
    if unknown:
        raise PipelineError(f"unknown map(s) {', '.join(sorted(unknown))}; choose from {', '.join(MAPS)}")
    for source, target in pairs.values():
        if source.shape[0] != target.shape[0]:
            raise PipelineError(f"alignment needs the same token rows, got {source.shape[0]} and {target.shape[0]}")
        if source.shape[1] != target.shape[1] and set(maps) - {"linear"}:
            raise PipelineError(
                f"identity/orthogonal maps need equal widths, got {source.shape[1]} and {target.shape[1]}"
            )
    v = next(iter(pairs.values()))[0].shape[0]
    order, n_fit = token_split(v, held_out, seed)
    permuted_order = torch.randperm(v, generator=torch.Generator().manual_seed(seed + 1))[order] if null else None
    views, slot, means = [], {}, {}

    def view(m, permuted):
        if (id(m), permuted) not in slot:
            slot[id(m), permuted] = len(views)
            views.append(_Rows(m, permuted_order if permuted else order))
            if id(m) not in means:  # a row permutation keeps the column means
                means[id(m)] = column_means(m)
        return slot[id(m), permuted]

    jobs = {
        (c, target): (view(s, False), view(t, target == "permuted"))
        for c, (s, t) in pairs.items()
        for target in (("true", "permuted") if null else ("true",))
    }
    needed = set()
    for i, j in jobs.values():
        if "orthogonal" in maps or "linear" in maps:
            needed.add((i, j))
        if "linear" in maps:
            needed.add((i, i))
    mean = [means[id(x.matrix)] for x in views]
    bounds = {"fit": (0, n_fit), "test": (n_fit, v)} if n_fit < v else {"fit": (0, v)}
    parts = _moments(views, mean, sorted(needed), bounds, chunk)

    def in_sample(i, j):
        return sum(prods[i, j] for _, prods in parts.values())

    fit_sums, fit_prods = parts["fit"]
    shift = {k: x / n_fit for k, x in fit_sums.items()}  # fit-row means minus all-row means

    def fit_only(i, j):
        return fit_prods[i, j] - n_fit * torch.outer(shift[i], shift[j])

    cosines = {}
    schemes = [("in_sample", in_sample, mean, 0, v)]
    if n_fit < v:
        fit_mean = [m + shift.get(k, 0) for k, m in enumerate(mean)]
        schemes.append(("held_out", fit_only, fit_mean, n_fit, v))
    ids = {}
    for scored, product, centre, lo, hi in schemes:
        rows = order[lo:hi]
        ids[scored], sort = rows.sort()
        for (c, target), (i, j) in jobs.items():
            cross = product(i, j) if (i, j) in needed else None
            fitted = _fit(maps, cross, product(i, i) if (i, i) in needed else None)
            found = mapped_cosines(views[i], views[j], fitted, centre[i], centre[j], lo, hi, chunk)
            cosines[c, scored, target] = {name: cos[sort] for name, cos in found.items()}
    return cosines, ids


def alignment_frame(untied, tied, maps=MAPS, keep=None, held_out=HELD_OUT, seed=SPLIT_SEED):
    """Tidy per-token cosines of the three comparisons of an (untied, tied) Embeddings pair.

    In sample and held out, for the true targets and the permuted-rows chance level. Pairs
    with different tokenizers are compared on their shared token strings; keep: token ids
    (of a shared vocabulary) to restrict the comparison to, e.g. the tokens seen in training.
    token_id is the untied model's id. A comparison across hidden sizes gets the linear map only.
    Returns columns comparison, map, scored, target, token_id, cosine, n_tokens, cross_tokenizer.
    """
    cross_tokenizer = not one_tokenizer(untied, tied)
    untied, tied, ids = compared_rows(untied, tied, keep)
    named = {"input_u": untied.input, "output_u": untied.output, "tied": tied.input}
    pairs = {c: (named[s], named[t]) for c, s, t in COMPARISONS}
    same = {c: p for c, p in pairs.items() if p[0].shape[1] == p[1].shape[1]}
    across = {c: p for c, p in pairs.items() if c not in same}
    options = {"held_out": held_out, "null": True, "seed": seed}
    cosines, rows = alignment_cosines(same, maps, **options) if same else ({}, None)
    if across:
        found, rows = alignment_cosines(across, [m for m in maps if m == "linear"], **options)
        cosines.update(found)
    frames = [
        pd.DataFrame(
            {
                "comparison": c,
                "map": name,
                "scored": scored,
                "target": target,
                "token_id": ids[rows[scored]].numpy(),
                "cosine": cos.numpy(),
            }
        )
        for c, *_ in COMPARISONS
        for (comparison, scored, target), by_map in cosines.items()
        if comparison == c
        for name, cos in by_map.items()
    ]
    return pd.concat(frames, ignore_index=True).assign(n_tokens=len(ids), cross_tokenizer=cross_tokenizer)


def scaling_frame(tied, untied, keep=None, held_out=HELD_OUT, seed=SPLIT_SEED):
    """Orthogonal-Procrustes mean cosine of a tied matrix against the untied E_in and E_out: the means
    of scaling_frames' per-token cosines (columns reference, scored, target, cosine, n_tokens)."""
    return scaling_frames(tied, untied, keep, held_out, seed)[0]


def scaling_frames(tied, untied, keep=None, held_out=HELD_OUT, seed=SPLIT_SEED):
    """Orthogonal-Procrustes cosines of a tied matrix against the untied E_in and E_out, and per token.

    In sample and held out, true and permuted-rows chance level (see alignment_frame).
    Returns (frame, per_token): frame with columns reference ("input_u", "output_u"), scored, target,
    cosine (the mean), n_tokens (Tables 2 and 6); per_token with columns reference, scored, target,
    token_id, cosine.
    """
    untied, tied, ids = compared_rows(untied, tied, keep)
    cosines, rows = alignment_cosines(
        {"input_u": (untied.input, tied.input), "output_u": (untied.output, tied.input)},
        maps=("orthogonal",),
        held_out=held_out,
        null=True,
        seed=seed,
    )
    per_token = pd.concat(
        [
            pd.DataFrame(
                {
                    "reference": ref,
                    "scored": scored,
                    "target": target,
                    "token_id": ids[rows[scored]].numpy(),
                    "cosine": c["orthogonal"].numpy(),
                }
            )
            for (ref, scored, target), c in cosines.items()
        ],
        ignore_index=True,
    )
    return _orthogonal_means(cosines, len(ids)), per_token


def ceiling_frame(untied, second, keep=None, held_out=HELD_OUT, seed=SPLIT_SEED):
    """C7's ceilings: the orthogonal-Procrustes cosine against the untied E_in of a second untied run's input matrix
    (reference "input_u") and against E_out of its output matrix ("output_u"), scored as scaling_frames scores a
    tied matrix: how close a matrix trained for that role from another start comes. Columns as scaling_frame's."""
    untied, second, ids = compared_rows(untied, second, keep)
    cosines, _ = alignment_cosines(
        {"input_u": (untied.input, second.input), "output_u": (untied.output, second.output)},
        maps=("orthogonal",),
        held_out=held_out,
        null=True,
        seed=seed,
    )
    return _orthogonal_means(cosines, len(ids))


def _orthogonal_means(cosines, n_tokens):
    """alignment_cosines' orthogonal cosines as a frame of means: reference, scored, target, cosine, n_tokens."""
    return pd.DataFrame(
        [
            {"reference": ref, "scored": scored, "target": target, "cosine": float(c["orthogonal"].mean())}
            for (ref, scored, target), c in cosines.items()
        ]
    ).assign(n_tokens=n_tokens)

"""The paper's claims as per-seed statistics, summarised over seeds, with a verdict each.

Each claim's statistic is computed within each seed (paired: the tied and untied runs
of one seed share data order), then summarised as mean and 95% bootstrap CI over
seeds. Every claim says "statistic > threshold". Verdict: "holds" when the CI lies
above the threshold, "does not hold" when below, "inconclusive" when it crosses;
with one seed the value's side decides.
"""
import math
from dataclasses import dataclass

import pandas as pd

from tying.errors import PipelineError
from tying.io import atomic_path, write_parquet
from tying.norm_frequency import shape_stats
from tying.stats import format_cell, mean_ci
from tying.tables import at_step, markdown


@dataclass(frozen=True)
class Claim:
    """One paper claim: what is measured, the paper's numbers, and the criterion."""

    description: str
    statistic: str
    paper: str
    paper_value: float  # the paper's value of the statistic (NaN: none)
    threshold: float = 0.0
    tolerance: float = math.nan  # paper-scale vs paper difference that gets flagged (NaN: no flag)

    @property
    def criterion(self):
        return f"{self.statistic} > {self.threshold:g}"


CLAIMS = {
    "C1": Claim(
        "The tied matrix aligns better with the untied output matrix than with the untied input matrix",
        "mean linear-map cosine Output(U)->Tied minus Input(U)->Tied",
        "0.719 vs 0.525 (+0.194)", 0.194, tolerance=0.02,
    ),
    "C2": Claim(
        "The tied matrix's nearest neighbours match Output(U)'s more than Input(U)'s",
        "KNN@k overlap Tied vs Output(U) minus Tied vs Input(U)",
        "0.733 vs 0.496 at k=10 (+0.237)", 0.237, tolerance=0.02,
    ),
    "C3": Claim(
        "The tied model's early layers are further from the output space (tuned lens)",
        "tied minus untied mean tuned-lens KL over the early half of the states (bits)",
        "states 0-7 of 16: mean 5.66 vs 4.64 bits (+1.01); input layer 8.86 vs 7.01", 1.014, tolerance=0.2,
    ),
    "C4": Claim(
        "In an untied run the output matrix moves further from its initialisation than the input matrix",
        "final-step drift (cosine to step 0) of input minus output, untied run",
        "OLMo-1B-0724 at 20k: input 0.87 vs output 0.56 (+0.31)", 0.31,
    ),
    "C5": Claim(
        "The output path dominates the tied matrix's gradient early in training",
        "mean output share ||G_out|| / (||G_in|| + ||G_out||) over the first steps, tied run",
        "70-83% over the first 1000 steps", math.nan, threshold=0.5,
    ),
    "C6": Claim(
        "Row norm rises with token frequency for the untied output and tied matrices, not the untied input",
        "min(rho_tied, rho_untied_output) minus rho_untied_input, Spearman rho of row norm vs log10 count",
        "qualitative: input flat; output and tied rise up to ~1e4 occurrences", math.nan,
    ),
    "C7": Claim(
        "Scaling the input-path gradient moves the tied matrix toward Input(U) and away from Output(U)",
        "(cos(x_k, In) - cos(tied, In)) - (cos(x_k, Out) - cos(tied, Out)), orthogonal Procrustes",
        "10k steps, x5: (0.222-0.216) - (0.369-0.384) = +0.021", 0.021,
    ),
}

MD_COLUMNS = ["claim", "description", "paper", "ours", "n_seeds", "criterion", "verdict"]


def alignment_gap(alignment, pair="main", step=None):
    """C1 per seed: mean linear-map cosine output_u->tied minus input_u->tied -> Series by seed."""
    rows = at_step(_only(alignment, pair=pair, map="linear"), step)
    means = rows.groupby(["seed", "comparison"])["cosine"].mean().unstack()
    return _pick(means, "output_u->tied", "alignment") - _pick(means, "input_u->tied", "alignment")


def knn_gap(knn, pair="main", k=10, step=None):
    """C2 per seed: overlap tied_vs_output_u minus tied_vs_input_u at `k` -> Series by seed."""
    rows = at_step(_only(knn, pair=pair, k=k), step)
    overlap = rows.set_index(["seed", "comparison"])["overlap"].unstack()
    return _pick(overlap, "tied_vs_output_u", "knn") - _pick(overlap, "tied_vs_input_u", "knn")


def lens_gap(gap, pair="main"):
    """C3 per seed from tying.lens.early_layer_gap's frame (pair, seed, ..., gap_bits) -> Series by seed."""
    return _only(gap, pair=pair).set_index("seed")["gap_bits"]


def drift_gap(evolution, run="main"):
    """C4 per seed: last-step drift of the input minus the output matrix -> Series by seed."""
    rows = at_step(_only(evolution, run=run), by=("run",))
    drift = rows.set_index(["seed", "matrix"])["drift"].unstack()
    return _pick(drift, "input", "evolution") - _pick(drift, "output", "evolution")


def output_share(grad_flow, pair="main", variant="tied", steps=None):
    """C5 per seed: mean out_share over the first `steps` logged steps (None: all) -> Series by seed."""
    rows = _only(grad_flow, pair=pair, variant=variant).sort_values("step")
    if steps is not None:
        rows = rows.groupby("seed").head(steps)
    return rows.groupby("seed")["out_share"].mean()


def norm_shape_gap(norm_freq, pair="main"):
    """C6 per seed: min(rho_tied, rho_untied_output) - rho_untied_input from shape_stats -> Series by seed."""
    gaps = {}
    for seed, rows in _only(norm_freq, pair=pair).groupby("seed"):
        rho = shape_stats(rows).set_index("matrix")["spearman"]
        tied, output, input_ = (_pick(rho, m, "norm_freq") for m in ("tied", "untied_output", "untied_input"))
        gaps[seed] = min(tied, output) - input_
    return pd.Series(gaps, dtype=float).rename_axis("seed")


def scaling_shift(scaling, pair="main", variant="tied_x5", step=None):
    """C7 per seed: (x_k - tied) toward Input(U) minus (x_k - tied) toward Output(U) -> Series by seed."""
    rows = _only(scaling, pair=pair)
    rows = at_step(rows[rows["variant"].isin(["tied", variant])], step)
    cos = rows.set_index(["seed", "variant", "reference"])["cosine"].unstack(["variant", "reference"])
    toward_input = _pick(cos, (variant, "input_u"), "scaling") - _pick(cos, ("tied", "input_u"), "scaling")
    toward_output = _pick(cos, (variant, "output_u"), "scaling") - _pick(cos, ("tied", "output_u"), "scaling")
    return toward_input - toward_output


def claim_statistics(alignment=None, knn=None, evolution=None, grad_flow=None, norm_freq=None,
                     scaling=None, lens=None, *, pair="main", k=10, grad_flow_steps=None,
                     scaled_variant="tied_x5"):
    """Per-seed statistic of every claim whose metric frame is given: {claim id: Series by seed}.

    Frames are the tidy metric tables; `lens` is tying.lens.early_layer_gap's frame.
    """
    makers = {
        "C1": (alignment, lambda f: alignment_gap(f, pair)),
        "C2": (knn, lambda f: knn_gap(f, pair, k)),
        "C3": (lens, lambda f: lens_gap(f, pair)),
        "C4": (evolution, lambda f: drift_gap(f, pair)),
        "C5": (grad_flow, lambda f: output_share(f, pair, steps=grad_flow_steps)),
        "C6": (norm_freq, lambda f: norm_shape_gap(f, pair)),
        "C7": (scaling, lambda f: scaling_shift(f, pair, scaled_variant)),
    }
    return {cid: make(frame) for cid, (frame, make) in makers.items() if frame is not None}


def verdict(mean, low, high, threshold):
    """'holds' / 'does not hold' / 'inconclusive' for the claim 'statistic > threshold'."""
    if math.isnan(low) or math.isnan(high):
        low = high = mean
    if low > threshold:
        return "holds"
    if high < threshold:
        return "does not hold"
    return "inconclusive"


def claims_table(statistics, paper_scale=None):
    """One row per claim in `statistics` ({claim id: per-seed Series}), in C1..C7 order.

    paper_scale: the same kind of dict computed from paper-scale runs (released
    checkpoints); adds columns paper_scale (text), paper_scale_mean and
    paper_scale_differs (|paper-scale - paper| > the claim's tolerance; NA without one).
    """
    unknown = set(statistics) - set(CLAIMS)
    if unknown:
        raise PipelineError(f"unknown claim ids {sorted(unknown)}; known: {list(CLAIMS)}")
    rows = []
    for cid, claim in CLAIMS.items():
        if cid not in statistics:
            continue
        values = statistics[cid]
        mean, low, high = mean_ci(values)
        row = {
            "claim": cid, "description": claim.description, "paper": claim.paper,
            "ours": format_cell(mean, low, high), "mean": mean, "ci_low": low, "ci_high": high,
            "n_seeds": int(pd.Series(values).notna().sum()), "criterion": claim.criterion,
            "verdict": verdict(mean, low, high, claim.threshold), "paper_value": claim.paper_value,
        }
        if paper_scale is not None:
            row.update(_paper_scale_columns(claim, paper_scale.get(cid)))
        rows.append(row)
    return pd.DataFrame(rows).astype({"paper_scale_differs": "boolean"} if paper_scale is not None else {})


def _paper_scale_columns(claim, values):
    mean, low, high = mean_ci([] if values is None else values)
    comparable = not (math.isnan(mean) or math.isnan(claim.paper_value) or math.isnan(claim.tolerance))
    return {
        "paper_scale": format_cell(mean, low, high), "paper_scale_mean": mean,
        "paper_scale_differs": abs(mean - claim.paper_value) > claim.tolerance if comparable else pd.NA,
    }


def write_claims(table, parquet_path, md_path):
    """results/tables/claims.{parquet,md}: every column to Parquet, the readable ones to Markdown."""
    write_parquet(table, parquet_path)
    extra = [c for c in ("paper_scale", "paper_scale_differs") if c in table.columns]
    with atomic_path(md_path) as tmp:
        tmp.write_text(markdown(table, MD_COLUMNS + extra))


def _pick(wide, key, metric):
    """wide[key] (a column, or an entry of a Series); a PipelineError naming the metric if absent."""
    present = wide.index if isinstance(wide, pd.Series) else wide.columns
    if key not in present:
        raise PipelineError(f"{metric} metric has no {key!r}; present: {list(present)}")
    return wide[key]


def _only(frame, **equal):
    """Rows where each column equals the given value; a PipelineError if none are left."""
    rows = frame
    for column, value in equal.items():
        rows = rows[rows[column] == value]
    if rows.empty:
        raise PipelineError(f"no metric rows with {equal}; present: "
                            + ", ".join(f"{c}={sorted(frame[c].unique().tolist())}" for c in equal))
    return rows

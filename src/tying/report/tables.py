"""Paper tables from tidy metric frames: mean [95% interval] over seeds beside the paper's numbers.

Every builder returns one DataFrame whose display columns (labels, "mean [low, high]" cells
with the Student-t interval over seeds, the paper's numbers as text, tokens, n_seeds) come
first and whose numeric columns, named `<key>_mean`, `<key>_ci_low`, `<key>_ci_high`, follow;
the CSV keeps them all, the Markdown shows the display columns. Fitted alignments are shown in
sample (as the paper reports them), held out, and each beside its permuted-rows chance level.
Pairs named "main", "family" and "scale" are matched to the paper's OLMo, GPT-Neo/Pythia and
Qwen3 pairs.
"""

import math

import pandas as pd

from tying import paper as published
from tying.errors import PipelineError
from tying.frames import NUMERIC_SUFFIXES, at_step, tokens_text
from tying.stats import format_cell, summarise, summarise_tokens

ALIGNMENT_COMPARISONS = {
    "input_u->output_u": "Input(U) -> Output(U)",
    "output_u->tied": "Output(U) -> Tied",
    "input_u->tied": "Input(U) -> Tied",
}
# The paper's identity column is the raw cosine (its authors' convention); the centred one is shown beside it.
MAPS = {
    "identity_uncentred": "identity, uncentred (paper's convention)",
    "identity": "identity, centred",
    "orthogonal": "orthogonal",
    "linear": "linear",
}
KNN_COMPARISONS = {
    "tied_vs_input_u": "Tied vs Input(U)",
    "tied_vs_output_u": "Tied vs Output(U)",
    "input_u_vs_output_u": "Input(U) vs Output(U)",
}
REFERENCES = {"input_u": "vs Input(U)", "output_u": "vs Output(U)"}
# How a fitted map was scored (alignment columns scored, target) -> column label.
FITS = {
    "in_sample": "in-sample",
    "in_sample_chance": "chance (in-sample, rows permuted)",
    "held_out": "held-out",
    "held_out_chance": "chance (held-out, rows permuted)",
}
KNN_COLUMNS = {"overlap": "overlap", "null_overlap": "null (rows permuted)", "chance": "chance k/(n-1)"}
LOSS_METRICS = {
    "val_loss": "val loss",
    "bigram_loss": "bigram table",
    "margin": "val loss - bigram",
    "unigram_loss": "unigram table",
    "perplexity": "perplexity",
}

# Table 1's cells of a map a comparison across widths cannot have (only the linear map maps one width to another).
UNDEFINED, UNDEFINED_WHY = "undefined (widths differ)", "none: identity and orthogonal maps need equal widths"

# The same Table 7 numbers beside a measured WikiText-2 column (downstream.perplexity.label: WikiText-2).
WIKITEXT2 = "WikiText-2 perplexity"


def with_fit(frame):
    """`frame` (columns scored, target) with a `fit` column keyed as in FITS."""
    chance = frame["target"].map({"true": "", "permuted": "_chance"})
    return frame.assign(fit=frame["scored"] + chance)


def summarise_per_token(rows, keys, values, released=()):
    """Mean [interval] of each per-token `values` column per `keys` group (keys start with "pair").

    Trained pairs: the per-seed means summarised over seeds (Student-t); `released` pairs (one
    pair of models, no seeds): a bootstrap over their tokens. Returns keys..., column, mean,
    ci_low, ci_high, n_seeds, interval, in the order the pairs first appear in `rows`.
    """
    values = list(values)
    seeded, one_pair = rows[~rows["pair"].isin(released)], rows[rows["pair"].isin(released)]
    per_seed = seeded.groupby([*keys, "seed"], as_index=False, sort=False)[values].mean()
    parts = [
        summarise(
            per_seed.melt([*keys, "seed"], values, var_name="column", value_name="value"), [*keys, "column"], "value"
        ),
        summarise_tokens(
            one_pair.melt(keys, values, var_name="column", value_name="value"), [*keys, "column"], "value"
        ),
    ]
    order = {pair: i for i, pair in enumerate(pd.unique(rows["pair"]))}
    summary = pd.concat([p for p in parts if not p.empty], ignore_index=True)
    return summary.sort_values("pair", key=lambda s: s.map(order), kind="stable", ignore_index=True)


def alignment_means(alignment, step=None, released=()):
    """Mean per-token cosine per (pair, comparison, map, fit) with its interval (summarise_per_token).

    alignment: tidy frame (pair, seed, step, comparison, map, scored, target, token_id, cosine).
    Returns pair, comparison, map, fit, mean, ci_low, ci_high, n_seeds, interval.
    """
    rows = with_fit(at_step(alignment, step))
    summary = summarise_per_token(rows, ["pair", "comparison", "map", "fit"], ["cosine"], released)
    return summary.drop(columns="column")


def table1(alignment, step=None, released=()):
    """Table 1: rows (pair, comparison, map), columns in-sample (beside the paper), held-out and
    their chance levels, and the tokens compared; `released`: pairs of hub models (token bootstrap). A
    comparison of matrices of different widths keeps its rows of the maps that need equal widths, each
    cell saying so (UNDEFINED)."""
    summary = _with_undefined_maps(alignment_means(alignment, step, released))
    paper = {(*key, "in_sample"): value for key, value in published.TABLE1.items()}
    table = _widen(
        summary, ["pair", "comparison", "map"], "fit", FITS, {"comparison": ALIGNMENT_COMPARISONS, "map": MAPS}, paper
    )
    undefined = table["interval"] == UNDEFINED_WHY
    table.loc[undefined, list(FITS.values())] = UNDEFINED
    return _with_tokens(table, at_step(alignment, step))


def _with_undefined_maps(summary):
    """`summary` (alignment_means) with a row per fit of each map a comparison lacks because it has the linear
    map alone (alignment_frame fits only that one across widths): mean NaN, interval UNDEFINED_WHY."""
    rows = []
    for _, group in summary.groupby(["pair", "comparison"], sort=False):
        if set(group["map"]) == {"linear"}:
            nan = math.nan
            rows += [
                group.assign(map=name, mean=nan, ci_low=nan, ci_high=nan, interval=UNDEFINED_WHY)
                for name in MAPS
                if name != "linear"
            ]
    return pd.concat([summary, *rows], ignore_index=True)


def table5(knn, step=None, released=()):
    """Table 5: KNN@k overlap, rows (pair, k, comparison), columns overlap (beside the paper),
    its permuted-rows null and the chance level k / (n - 1); `released`: pairs of hub models.

    knn: tidy per-token frame (pair, seed, step, comparison, k, token_id, overlap, null_overlap, chance).
    """
    rows = at_step(knn, step)
    keys = ["pair", "k", "comparison"]
    summary = summarise_per_token(rows, keys, KNN_COLUMNS, released)
    paper = {(pair, 10, comparison, "overlap"): v for (pair, comparison), v in published.TABLE5.items()}
    table = _widen(summary, keys, "column", KNN_COLUMNS, {"comparison": KNN_COMPARISONS}, paper)
    return _with_tokens(table, rows)


def input_scaling_table(scaling, steps, paper=None):
    """Orthogonal cosine of each tied variant vs Input(U) and Output(U), rows (pair, step, variant,
    reference), columns in-sample (beside the paper), held-out and their chance levels.

    scaling: tidy frame (pair, seed, step, variant, reference, scored, target, cosine); steps:
    the steps to show; paper: {(variant, reference): text} shown beside the in-sample cells.
    """
    rows = scaling[scaling["step"].isin(list(steps))]
    if rows.empty:
        raise PipelineError(
            f"no scaling rows at steps {list(steps)}; steps present: {sorted(scaling['step'].unique())}"
        )
    keys = ["pair", "step", "variant", "reference"]
    summary = summarise(with_fit(rows), [*keys, "fit"], "cosine")
    keyed = {
        (*key, "in_sample"): paper[key[2:]]
        for key in summary[keys].itertuples(index=False, name=None)
        if key[2:] in (paper or {})
    }
    return _with_tokens(_widen(summary, keys, "fit", FITS, {"reference": REFERENCES}, keyed), rows)


def table2(scaling, step=None):
    """Table 2: scaling at the final step (or `step`), beside the paper's 10k-step numbers."""
    return input_scaling_table(scaling, [scaling["step"].max() if step is None else step], published.TABLE2)


def table6(scaling, step):
    """Table 6: scaling at an early `step`, beside the paper's 1k-step numbers."""
    return input_scaling_table(scaling, [step], published.TABLE6)


def table7(loss, step=None):
    """Table 7: held-out loss beside the count tables' and perplexity, rows (arch, variant), then any
    downstream metrics.

    loss: tidy frame (arch, variant, seed, step and LOSS_METRICS's columns: tying.metrics.model_quality.loss_frame),
    concatenated with the downstream rows (arch, variant, seed, step, metric, value: tying.metrics.downstream) when
    there are any; last step per run. The paper's WikiText-2 numbers sit beside a measured WikiText-2 column,
    else beside the held-out perplexity.
    """
    rows = at_step(loss, step, by=("arch", "variant"))
    ids = ["arch", "variant", "seed"]
    downstream = rows.dropna(subset=["metric"]) if "metric" in rows else rows.iloc[:0].assign(metric=None, value=None)
    held_out = rows.drop(index=downstream.index, columns=["metric", "value"], errors="ignore")
    long = pd.concat(
        [
            held_out.melt(ids, list(LOSS_METRICS), var_name="metric", value_name="value"),
            downstream[[*ids, "metric", "value"]],
        ],
        ignore_index=True,
    )
    labels = LOSS_METRICS | {m: m for m in pd.unique(downstream["metric"])}
    summary = summarise(long, ["arch", "variant", "metric"], "value")
    paper = (
        {(arch, variant, WIKITEXT2): value for (arch, variant, _), value in published.TABLE7_PERPLEXITY.items()}
        if WIKITEXT2 in labels
        else {key: f"{value} (WikiText-2)" for key, value in published.TABLE7_PERPLEXITY.items()}
    )
    return _widen(summary, ["arch", "variant"], "metric", labels, None, paper)


def _widen(summary, index, column, labels, row_labels, paper):
    """One row per `index` key: for each `column` value, its cell, the paper's value and numbers.

    summary: output of stats.summarise over index + [column]; labels: column value ->
    header; row_labels: {index level: {value: display name}} (levels shown in that order),
    or None; paper: {(*index key, column value): number or text}.
    """
    row_labels = row_labels or {}
    rows = []
    for key, group in _ordered(summary, index, row_labels).groupby(index, sort=False):
        display, numeric = dict(zip(index, key)), {}
        for level, names in row_labels.items():
            display[level] = names.get(display[level], display[level])
        by_value = group.set_index(column)
        for value, label in labels.items():
            cell = by_value.loc[value] if value in by_value.index else None
            stats = (math.nan,) * 3 if cell is None else (cell["mean"], cell["ci_low"], cell["ci_high"])
            display[label] = format_cell(*stats)
            if (*key, value) in paper:
                display[f"{label} (paper)"] = _paper_text(paper[(*key, value)])
            numeric.update({f"{value}_{suffix}": s for suffix, s in zip(NUMERIC_SUFFIXES, stats)})
        display["interval"] = group["interval"].iloc[0]
        display["n_seeds"] = int(group["n_seeds"].max())
        rows.append({**display, **numeric})
    return _fill_paper_columns(pd.DataFrame(rows))


def _ordered(summary, index, row_labels):
    """Rows sorted by each index level in order of first appearance; levels in `row_labels` in its order."""
    ranks = {level: {v: i for i, v in enumerate(pd.unique(summary[level]))} for level in index}
    for level, names in row_labels.items():
        extra = [v for v in ranks[level] if v not in names]
        ranks[level] = {v: i for i, v in enumerate([*names, *extra])}
    return summary.sort_values(index, key=lambda s: s.map(ranks[s.name]), kind="stable")


def _with_tokens(table, metric):
    """`table` with a `tokens` column after its labels: the tokens each pair's numbers used
    (n_tokens of the metric; "shared strings" for a pair of two tokenizers)."""
    if "n_tokens" not in metric.columns:
        return table
    cross = metric["cross_tokenizer"] if "cross_tokenizer" in metric.columns else pd.Series(False, metric.index)
    per_pair = metric.assign(cross=cross).groupby("pair").agg(n=("n_tokens", "max"), cross=("cross", "any"))
    text = {pair: tokens_text(row.n, row.cross) for pair, row in per_pair.iterrows()}
    tokens = table["pair"].map(text)
    at = list(table.columns).index("interval")
    return pd.concat([table.iloc[:, :at], tokens.rename("tokens"), table.iloc[:, at:]], axis=1)


def _paper_text(value):
    return value if isinstance(value, str) else f"{value:.3f}"


def _fill_paper_columns(table):
    """Rows without a paper counterpart get empty paper cells; paper columns sit next to their cell."""
    paper_cols = [c for c in table.columns if c.endswith(" (paper)")]
    table[paper_cols] = table[paper_cols].fillna("")
    order = []
    for c in table.columns:
        if c in paper_cols:
            continue
        order.append(c)
        if f"{c} (paper)" in paper_cols:
            order.append(f"{c} (paper)")
    return table[order]


# The table of each table rule: rule name -> a builder of (frame, **the rule's params).
TABLES = {"table1": table1, "table2": table2, "table5": table5, "table6": table6, "table7": table7}


def build(rule, frame, **params):
    """Table rule `rule`'s table from its metric `frame` and params (workflow/scripts/table.py)."""
    if rule not in TABLES:
        raise PipelineError(
            f"no table is registered for rule {rule!r} (tying.report.tables.TABLES: {', '.join(TABLES)})"
        )
    return TABLES[rule](frame, **params)

"""The survey of released models: for every comparison, does the tied matrix sit closer to the
untied output matrix than to the untied input matrix, beside negative controls?

A comparison is a pair (a tied and an untied model). A negative control fills the "tied" role
with one matrix of a second, untied model: its input matrix (`control: input`, where the
claim should not appear) or its output matrix (`control: output`, two output matrices: how
close output spaces get), written as a tied model by `tying.checkpoints.controls`, so the alignment and KNN
metrics read a control like any pair.

The table is built from the per-pair metric tables: held-out linear-map alignment of
Output(U)->Tied and Input(U)->Tied with their permuted-rows chance levels, and KNN@k overlaps
with their chance. Released models have no seeds: the interval of the gap is a bootstrap over
the held-out tokens, which says how precisely that pair's gap is known, not whether it generalises.
"""

import math

import pandas as pd

from tying.checkpoints.controls import CONTROLS
from tying.claims.definitions import CLAIMS
from tying.claims.statistics import alignment_gap
from tying.claims.verdicts import verdict
from tying.errors import PipelineError
from tying.frames import only, pick, tokens_text, write_table
from tying.plan.pins import COMMIT
from tying.stats import format_cell, token_bootstrap_ci

PAIR_KIND = "tied vs untied"
INTEGER_COLUMNS = ["d_tied", "d_untied", "n_tokens", "n_held_out", "knn_k"]  # empty, not NaN, in a row not run
MD_COLUMNS = [
    "comparison",
    "family",
    "kind",
    "tied",
    "untied",
    "d (tied / untied)",
    "params (tied / untied)",
    "tokens",
    "Output(U)->Tied",
    "Input(U)->Tied",
    "gap [token bootstrap 95%]",
    "KNN Tied vs Output(U)",
    "KNN Tied vs Input(U)",
    "verdict",
]
NOTE = (
    "Alignment: linear map fitted on a seeded 80% of the tokens, scored on the other 20% (held out); "
    "chance = the same with the target's rows permuted. Gap = Output(U)->Tied minus Input(U)->Tied over "
    "the held-out tokens; its interval is a bootstrap over tokens of one pair of models (how precisely "
    "that pair's gap is known, not whether it generalises). Verdict: claim C1 (gap > 0) holds when the "
    "interval lies above 0. KNN@{k} ({mode}): mean overlap of the k nearest neighbours, chance k/(n-1) "
    "in parentheses. A control fills the tied role with a second untied model's input (the claim "
    "should not hold) or output matrix. Models are named repo@commit: the first 7 characters of the "
    "commit each was fetched at (its source.json)."
)


def hidden_sizes(comparison, tied_dir, untied_dir):
    """(d_tied, d_untied) from the two models' config.json (via transformers' config classes, so GPT-2's
    n_embd counts), after checking that the tied reference is tied and the untied one untied."""
    from transformers import AutoConfig  # here: the survey figure's job imports this module and no model code

    sizes = []
    for role, model_dir in (("tied", tied_dir), ("untied", untied_dir)):
        config = AutoConfig.from_pretrained(model_dir)
        if bool(config.tie_word_embeddings) != (role == "tied"):
            raise PipelineError(
                f"comparison {comparison!r}: its {role} model {model_dir} is "
                f"{'untied' if role == 'tied' else 'tied'} (config.json)"
            )
        sizes.append(int(config.hidden_size))
    return tuple(sizes)


def comparison_row(alignment, knn, pair):
    """The survey's numbers for comparison `pair` (one seed) from the metric frames.

    alignment: tidy rows (pair, seed, step, comparison, map, scored, target, token_id, cosine, n_tokens,
    cross_tokenizer); knn: tidy rows (pair, seed, comparison, k, token_id, overlap, null_overlap, chance).
    Returns a dict: held-out linear-map means of Output(U)->Tied and Input(U)->Tied and their
    permuted-rows chance levels, the gap with its token-bootstrap interval, KNN overlaps at the
    largest k with their permuted null and chance, and the token counts.
    """
    alignment, knn = _one_comparison(alignment, pair), _one_comparison(knn, pair)
    rows = alignment[(alignment["map"] == "linear") & (alignment["scored"] == "held_out")]
    if rows.empty:
        raise PipelineError("alignment metric has no held-out linear-map rows (is it from before held-out scoring?)")
    means = rows.groupby(["comparison", "target"])["cosine"].mean()
    gap = alignment_gap(alignment, pair, per_token=True)
    gap_mean, gap_low, gap_high = token_bootstrap_ci(gap)
    k = int(knn["k"].max())
    overlaps = knn[knn["k"] == k].groupby("comparison")[["overlap", "null_overlap"]].mean()
    return {
        "n_tokens": int(rows["n_tokens"].iloc[0]),
        "cross_tokenizer": bool(rows["cross_tokenizer"].iloc[0]),
        "out_tied": _value(means, ("output_u->tied", "true")),
        "out_tied_chance": _value(means, ("output_u->tied", "permuted")),
        "in_tied": _value(means, ("input_u->tied", "true")),
        "in_tied_chance": _value(means, ("input_u->tied", "permuted")),
        "gap_mean": gap_mean,
        "gap_ci_low": gap_low,
        "gap_ci_high": gap_high,
        "n_held_out": int(gap.notna().sum()),
        "knn_k": k,
        "knn_chance": float(knn["chance"].iloc[0]),
        "knn_tied_output": _value(overlaps["overlap"], "tied_vs_output_u"),
        "knn_tied_input": _value(overlaps["overlap"], "tied_vs_input_u"),
        "knn_tied_output_null": _value(overlaps["null_overlap"], "tied_vs_output_u"),
        "knn_tied_input_null": _value(overlaps["null_overlap"], "tied_vs_input_u"),
    }


def survey_table(alignment, knn, comparisons, skipped=()):
    """One row per comparison: its models, sizes, family, kind, numbers (comparison_row) and verdict.

    alignment, knn: the metric frames of every comparison (column pair); comparisons: dicts with
    pair, family, control (None, "input" or "output"), tied, untied (model names, repo@revision),
    commit_tied, commit_untied (the commits fetched, source_commit), d_tied, d_untied (hidden sizes)
    and params_tied, params_untied (parameters in billions, NaN when unknown); skipped: the same dicts
    for comparisons left out (gated models and no token; commits and sizes None), listed as not run.
    Display columns (MD_COLUMNS) first, then the numbers; a model's name shows the short commit its
    numbers came from in place of its revision.
    """
    rows = []
    for c in comparisons:
        numbers = comparison_row(alignment, knn, c["pair"])
        verdict_text = verdict(
            CLAIMS["C1"], [numbers["gap_mean"]], numbers["gap_ci_low"], numbers["gap_ci_high"], one_pair=True
        )
        rows.append({**_display(c), **_display_numbers(numbers), "verdict": verdict_text, **_facts(c), **numbers})
    for c in skipped:
        rows.append({**_display(c), "verdict": "not run: gated model and no HF token", **_facts(c)})
    table = pd.DataFrame(rows)
    return table.astype({column: "Int64" for column in INTEGER_COLUMNS if column in table.columns})


def write_survey(table, csv_path, md_path, approximate):
    """results/tables/survey.csv (every column) and survey.md (MD_COLUMNS and a note), each atomically."""
    note = NOTE.format(k=int(table["knn_k"].dropna().iloc[0]), mode="approximate" if approximate else "exact")
    write_table(table, csv_path, md_path, MD_COLUMNS, notes="\n" + note + "\n")


def _display(c):
    return {
        "comparison": c["pair"],
        "family": c["family"],
        "kind": CONTROLS.get(c["control"], PAIR_KIND),
        "tied": _measured(c["tied"], c["commit_tied"]),
        "untied": _measured(c["untied"], c["commit_untied"]),
        "d (tied / untied)": f"{c['d_tied'] or 'n/a'} / {c['d_untied'] or 'n/a'}",
        "params (tied / untied)": f"{_billions(c['params_tied'])} / {_billions(c['params_untied'])}",
    }


def _display_numbers(n):
    return {
        "tokens": tokens_text(n["n_tokens"], n["cross_tokenizer"]),
        "Output(U)->Tied": f"{n['out_tied']:.3f} (chance {n['out_tied_chance']:.3f})",
        "Input(U)->Tied": f"{n['in_tied']:.3f} (chance {n['in_tied_chance']:.3f})",
        "gap [token bootstrap 95%]": format_cell(n["gap_mean"], n["gap_ci_low"], n["gap_ci_high"]),
        "KNN Tied vs Output(U)": f"{n['knn_tied_output']:.3f} ({n['knn_chance']:.4f})",
        "KNN Tied vs Input(U)": f"{n['knn_tied_input']:.3f} ({n['knn_chance']:.4f})",
    }


def _measured(name, commit):
    """`name` (repo@revision, then any suffix) with the revision shown as the first 7 characters of the
    commit fetched or, not fetched, of a 40-character revision."""
    repo, _, rest = name.partition("@")
    revision, space, suffix = rest.partition(" ")
    shown = (commit or revision)[:7] if commit or COMMIT.fullmatch(revision) else revision
    return f"{repo}@{shown}{space}{suffix}"


def _facts(c):
    facts = ("commit_tied", "commit_untied", "d_tied", "d_untied", "params_tied", "params_untied")
    return {"control": c["control"] or "", **{key: c[key] for key in facts}}


def _billions(count):
    return "n/a" if math.isnan(count) else f"{count:g}B"


def _one_comparison(frame, pair):
    rows = only(frame, pair=pair)
    if rows["seed"].nunique() > 1:
        raise PipelineError(f"comparison {pair!r} has several seeds; the survey compares released models (one each)")
    return rows


def _value(series, key):
    return float(pick(series, key))

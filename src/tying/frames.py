"""Selecting from tidy metric frames and showing them: the helpers tables, claims, the survey,
claims over training and the figures share.

A tidy frame has one row per measured value and identification columns (pair, seed, step, ...).
"""

import math

import pandas as pd

from tying.errors import PipelineError
from tying.io import atomic_path

NUMERIC_SUFFIXES = ("mean", "ci_low", "ci_high")  # a table's `<key>_mean`, `<key>_ci_low`, `<key>_ci_high`


def at_step(frame, step=None, by=("pair",)):
    """Rows of `frame` at `step`; None = the last step of each `by` group."""
    if step is None:
        return frame[frame["step"] == frame.groupby(list(by))["step"].transform("max")]
    rows = frame[frame["step"] == step]
    if rows.empty:
        raise PipelineError(f"no rows at step {step}; steps present: {sorted(frame['step'].unique())}")
    return rows


def only(frame, **equal):
    """Rows where each column equals the given value; a PipelineError if none are left."""
    rows = frame
    for column, value in equal.items():
        rows = rows[rows[column] == value]
    if rows.empty:
        raise PipelineError(
            f"no metric rows with {equal}; present: "
            + ", ".join(f"{c}={sorted(frame[c].unique().tolist())}" for c in equal)
        )
    return rows


def pick(wide, key, metric="metric"):
    """wide[key] (a column, or an entry of a Series); a PipelineError naming the metric if absent."""
    present = wide.index if isinstance(wide, pd.Series) else wide.columns
    if key not in present:
        raise PipelineError(f"{metric} metric has no {key!r}; present: {list(present)}")
    return wide[key]


def tokens_text(n_tokens, cross_tokenizer):
    """How many tokens a comparison used, e.g. '1,000' or '300 shared strings' (two tokenizers)."""
    return f"{n_tokens:,}" + (" shared strings" if cross_tokenizer else "")


def display_columns(table):
    """Columns a reader sees: all but the `<key>_mean/_ci_low/_ci_high` numbers."""
    return [c for c in table.columns if not any(c == s or c.endswith(f"_{s}") for s in NUMERIC_SUFFIXES)]


def markdown(table, columns=None):
    """A GitHub Markdown table of `columns` (default: display_columns); floats to 3 decimals."""
    columns = display_columns(table) if columns is None else list(columns)
    lines = ["| " + " | ".join(_md(c) for c in columns) + " |", "|" + "---|" * len(columns)]
    for row in table[columns].itertuples(index=False):
        lines.append("| " + " | ".join(_md(v) for v in row) + " |")
    return "\n".join(lines) + "\n"


def _md(value):
    if isinstance(value, float):
        return "" if math.isnan(value) else f"{value:.3f}"
    if value is None or value is pd.NA:
        return ""
    return str(value).replace("|", "\\|")


def write_table(table, csv_path, md_path, columns=None, shown=None, notes=""):
    """A table's two files, each written whole or not at all: every column of `table` as CSV, and `shown`
    (default `table`) as Markdown in `columns` (those it has; default: display_columns), then `notes`."""
    shown = table if shown is None else shown
    columns = None if columns is None else [c for c in columns if c in shown.columns]
    with atomic_path(csv_path) as tmp:
        table.to_csv(tmp, index=False)
    with atomic_path(md_path) as tmp:
        tmp.write_text(markdown(shown, columns) + notes)

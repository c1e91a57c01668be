"""Tidy metric frames: identification columns first, one frame from many files."""

import pandas as pd


def with_ids(frame, ids):
    """`frame` with the constant columns `ids` (e.g. pair, seed, step) prepended."""
    return frame.assign(**ids)[[*ids, *[c for c in frame.columns if c not in ids]]]


def read_frames(paths, **equal):
    """Concatenate the Parquet files `paths` into one frame; `equal` (column=value) keeps only the
    matching rows, filtered as the files are read (a survey's per-token alignment rows would not fit)."""
    filters = [(column, "==", value) for column, value in equal.items()] or None
    return pd.concat([pd.read_parquet(p, filters=filters) for p in paths], ignore_index=True)

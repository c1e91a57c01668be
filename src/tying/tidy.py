"""Tidy metric frames: identification columns first, one frame from many files."""
import pandas as pd


def with_ids(frame, ids):
    """`frame` with the constant columns `ids` (e.g. pair, seed, step) prepended."""
    return frame.assign(**ids)[[*ids, *[c for c in frame.columns if c not in ids]]]


def read_frames(paths):
    """Concatenate the Parquet files `paths` into one frame."""
    return pd.concat([pd.read_parquet(p) for p in paths], ignore_index=True)

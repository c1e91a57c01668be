"""Tidy frames: reading many metric files into one, with rows filtered as they are read."""

import pandas as pd

from tying.tidy import read_frames, with_ids


def test_read_frames_keeps_only_the_rows_asked_for(tmp_path):
    paths = []
    for seed in (0, 1):
        frame = pd.DataFrame(
            {
                "map": ["linear", "orthogonal", "linear"],
                "scored": ["held_out", "held_out", "in_sample"],
                "cosine": [0.5, 0.6, 0.7],
            }
        )
        paths.append(tmp_path / f"seed{seed}.parquet")
        with_ids(frame, {"seed": seed}).to_parquet(paths[-1])
    every = read_frames(paths)
    assert len(every) == 6 and list(every.columns) == ["seed", "map", "scored", "cosine"]
    kept = read_frames(paths, map="linear", scored="held_out")
    assert kept["seed"].tolist() == [0, 1] and kept["cosine"].tolist() == [0.5, 0.5]

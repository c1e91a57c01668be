"""The analysed-token set: the tokens a pair's runs drew in training, read by every trained-run metric."""

import numpy as np
import pandas as pd
import pytest
import torch

from tying.checkpoints.embeddings import Embeddings
from tying.claims import statistics
from tying.data.batches import train_batch
from tying.data.token_sets import analysed_tokens, drawn_by_step, drawn_frame, seen_by, token_set_frame, write_token_set
from tying.errors import PipelineError
from tying.metrics.evolution import evolution_frames

V = 40


def _direct(ids, seed, steps, batch_size, seq_len):
    """Each id's count at the input positions of the batches of steps 1..steps, from train_batch itself."""
    direct = np.zeros(V, dtype=np.int64)
    for step in range(1, steps + 1):
        np.add.at(direct, train_batch(ids, step, seed, batch_size, seq_len)[0].numpy().ravel(), 1)
    return direct


def test_drawn_counts_are_the_input_positions_of_the_runs_batches():
    ids = np.random.default_rng(0).integers(0, V, size=2000).astype(np.uint16)
    drawn = drawn_by_step(ids, V, seed=3, steps=5, batch_size=4, seq_len=16)[5]
    assert drawn.tolist() == _direct(ids, 3, 5, 4, 16).tolist() and drawn.sum() == 5 * 4 * 16


def test_a_token_in_the_split_but_never_drawn_is_left_out(tmp_path):
    # Token 5 occurs once in the training split, at its very end, which no input window reaches.
    ids = np.r_[np.tile(np.arange(5), 400), 5].astype(np.uint16)
    counts = pd.DataFrame({"token_id": np.arange(V), "count": np.bincount(ids, minlength=V)})
    drawn = drawn_frame(drawn_by_step(ids, V, 0, 30, 4, 8, at=[10, 30]), 4, 8)
    write_token_set(counts, [drawn], 30, 1, tmp_path / "set.parquet", tmp_path / "by_step.parquet")
    frame = pd.read_parquet(tmp_path / "set.parquet")
    assert frame["token_id"].tolist() == [0, 1, 2, 3, 4] and (frame["n_tokens"] == 5).all()
    assert frame["count"].tolist() == [400] * 5
    assert frame["drawn"].sum() == 30 * 4 * 8 and (frame["positions"] == 30 * 4 * 8).all()
    assert frame["per_million"].to_numpy() == pytest.approx(frame["drawn"] / (30 * 4 * 8) * 1e6)
    assert analysed_tokens(tmp_path / "set.parquet").tolist() == [0, 1, 2, 3, 4]
    assert analysed_tokens(None) is None
    by_step = pd.read_parquet(tmp_path / "by_step.parquet")
    assert sorted(set(by_step["step"])) == [10, 30]
    assert by_step.loc[by_step["step"] == 10, "drawn"].sum() == 10 * 4 * 8


def test_drawn_by_step_counts_each_checkpoints_batches_once():
    ids = np.random.default_rng(1).integers(0, V, size=3000).astype(np.uint16)
    by_step = drawn_by_step(ids, V, seed=2, steps=9, batch_size=3, seq_len=8, at=[0, 4, 9])
    assert by_step[0].sum() == 0 and by_step[9].tolist() == _direct(ids, 2, 9, 3, 8).tolist()
    assert by_step[4].tolist() == _direct(ids, 2, 4, 3, 8).tolist()


def test_tokens_seen_by_a_checkpoint_leave_out_those_first_drawn_after_it():
    by_step = pd.DataFrame({"step": [50] * 3 + [300] * 3, "token_id": [0, 1, 2] * 2, "drawn": [0, 1, 4, 2, 9, 30]})
    assert seen_by(by_step, 50, 1).tolist() == [1, 2] and seen_by(by_step, 300, 1).tolist() == [0, 1, 2]
    assert seen_by(by_step, 50, 2).tolist() == [2]


def test_every_run_of_the_pair_must_have_drawn_the_token():
    frame = token_set_frame(np.array([9, 9, 9, 9]), [np.array([3, 0, 2, 5]), np.array([3, 4, 1, 5])], min_count=2)
    assert frame["token_id"].tolist() == [0, 3] and frame["drawn"].tolist() == [3, 5]
    with pytest.raises(PipelineError, match="only 0 tokens"):
        token_set_frame(np.ones(3), [np.zeros(3, dtype=int)], min_count=1)


def test_never_drawn_rows_no_longer_inflate_c4():
    # An untied run whose drawn rows move (input less than output) and whose 100 never-drawn input
    # rows keep their direction exactly (no gradient), as an untied input row of an unseen token does.
    g = torch.Generator().manual_seed(0)
    rows = []
    for seed in (0, 1, 2):
        start_in, start_out = torch.randn(300, 16, generator=g), torch.randn(300, 16, generator=g)
        end_in = start_in + 0.8 * torch.randn(300, 16, generator=g)
        end_in[200:] = start_in[200:]
        end_out = start_out + 1.2 * torch.randn(300, 16, generator=g)
        tokens = tuple(map(str, range(300)))
        steps = [(0, Embeddings(start_in, start_out, False, tokens)), (300, Embeddings(end_in, end_out, False, tokens))]
        for keep, run in ((None, "all rows"), (np.arange(200), "drawn")):
            rows.append(evolution_frames(steps, keep=keep)[0].assign(run=run, seed=seed))
    evolution = pd.concat(rows, ignore_index=True)
    every, drawn = statistics.drift_gap(evolution, run="all rows"), statistics.drift_gap(evolution, run="drawn")
    assert (every - drawn > 0.05).all()  # the never-drawn rows' drift of exactly 1 inflates the input's
    assert (evolution.loc[evolution["run"] == "drawn", "n_tokens"] == 200).all()
    last = evolution[(evolution["run"] == "drawn") & (evolution["step"] == 300)].set_index(["seed", "matrix"])
    expected = torch.nn.functional.cosine_similarity(end_in[:200], start_in[:200], dim=1).mean().item()
    assert last.loc[(2, "input"), "drift"] == pytest.approx(expected, abs=1e-6)

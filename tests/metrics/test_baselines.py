"""Count-table baselines: what a run's model must beat before its claims describe a language model."""

import math

import numpy as np
import pytest

from tying.data.batches import train_batch
from tying.metrics import baselines
from tying.metrics.baselines import count_baselines, validation_pairs

V, SEQ, BATCH = 12, 32, 16


def markov_chain(n, seed, transitions=None):
    """n tokens of a first-order Markov chain over V tokens, its transition matrix (random unless given) and
    stationary distribution."""
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.full(V, 0.3), size=V) if transitions is None else transitions
    cumulative = p.cumsum(axis=1)
    u = rng.random(n)
    ids = np.empty(n, dtype=np.uint16)
    ids[0] = 0
    for i in range(1, n):
        ids[i] = min(np.searchsorted(cumulative[ids[i - 1]], u[i]), V - 1)
    values, vectors = np.linalg.eig(p.T)
    stationary = np.real(vectors[:, np.argmin(np.abs(values - 1))])
    return ids, p, stationary / stationary.sum()


def entropy_rate(p, stationary):
    return float(-(stationary[:, None] * p * np.log(p)).sum())


@pytest.fixture(scope="module")
def chain():
    """A training split, a validation split drawn from the same chain, and the chain."""
    train, p, stationary = markov_chain(60_000, seed=0)
    val, _, _ = markov_chain(8 * BATCH * SEQ + 1, seed=1, transitions=p)
    return train, val, p, stationary


def direct_bigram_loss(train, val, steps, weight, seed=0):
    """The interpolated bigram's loss counted with NumPy from the batches train_batch gives, at `weight`."""
    pairs = np.zeros((V, V))
    for step in range(1, steps + 1):
        x, y = train_batch(train, step, seed, BATCH, SEQ)
        np.add.at(pairs, (x.numpy().ravel(), y.numpy().ravel()), 1)
    unigram = (pairs.sum(axis=0) + 1) / (pairs.sum() + V)
    conditional = pairs / np.maximum(pairs.sum(axis=1, keepdims=True), 1)
    x, y = validation_pairs(val, 8, BATCH, SEQ)
    p = np.where(pairs.sum(axis=1)[x] > 0, weight * conditional[x, y] + (1 - weight) * unigram[y], unigram[y])
    return float(-np.log(p).mean()), float(-np.log(unigram[y]).mean())


def test_bigram_baseline_equals_its_numpy_count(chain):
    train, val, _, _ = chain
    rows = count_baselines(train, val, V, (0, 40, BATCH, SEQ), 8, [0, 10, 40]).set_index("step")
    for step in (10, 40):
        bigram, unigram = direct_bigram_loss(train, val, step, rows.loc[step, "bigram_weight"])
        assert rows.loc[step, "bigram_loss"] == pytest.approx(bigram, rel=1e-12)
        assert rows.loc[step, "unigram_loss"] == pytest.approx(unigram, rel=1e-12)
        assert rows.loc[step, "positions"] == step * BATCH * SEQ and rows.loc[step, "targets"] == 8 * BATCH * SEQ
    assert rows.loc[0, "bigram_loss"] == rows.loc[0, "unigram_loss"] == pytest.approx(math.log(V))
    assert math.isnan(rows.loc[0, "bigram_weight"])


def test_bigram_baseline_approaches_the_chains_entropy_rate_as_tokens_grow(chain):
    train, val, p, stationary = chain
    rows = count_baselines(train, val, V, (0, 300, BATCH, SEQ), 8, [1, 5, 20, 300]).set_index("step")
    x, y = validation_pairs(val, 8, BATCH, SEQ)
    oracle = float(-np.log(p[x, y]).mean())  # the true chain's loss on these very targets
    assert oracle == pytest.approx(entropy_rate(p, stationary), abs=0.05)
    excess = rows["bigram_loss"] - oracle
    assert excess[1] > excess[5] > excess[20] > 0 and excess[1] > 0.05
    assert abs(excess[300]) < 0.002  # 150k pairs drawn: the table is the chain, to this sample's precision
    assert (rows["unigram_loss"] - oracle > 0.3).all()  # the chain is far from memoryless


def test_the_interpolation_weight_is_chosen_without_the_validation_tokens(chain):
    train, val, p, _ = chain
    other, _, _ = markov_chain(8 * BATCH * SEQ + 1, seed=7, transitions=p)
    a = count_baselines(train, val, V, (0, 40, BATCH, SEQ), 8, [10, 40])
    b = count_baselines(train, other, V, (0, 40, BATCH, SEQ), 8, [10, 40])
    assert a["bigram_weight"].tolist() == b["bigram_weight"].tolist()
    assert not np.allclose(a["bigram_loss"], b["bigram_loss"])


def test_the_weight_trusts_the_bigram_as_far_as_held_out_training_tokens_do():
    deterministic = np.tile(np.arange(V), 2_000).astype(np.uint16)  # each token fixes the next one
    memoryless = np.random.default_rng(3).integers(0, V, 24_000).astype(np.uint16)
    weights = {
        name: count_baselines(ids, ids[: 8 * BATCH * SEQ + 1], V, (0, 40, BATCH, SEQ), 8, [40])["bigram_weight"].iloc[0]
        for name, ids in (("deterministic", deterministic), ("memoryless", memoryless))
    }
    assert weights["deterministic"] > 0.99 and weights["memoryless"] < 0.2


def test_a_run_past_the_held_out_sample_chooses_its_weight_on_a_sample_and_counts_every_pair(chain, monkeypatch):
    train, val, _, _ = chain
    whole = count_baselines(train, val, V, (0, 40, BATCH, SEQ), 8, [40]).iloc[0]
    monkeypatch.setattr(baselines, "HELD_OUT_PAIRS", 100 * SEQ)  # 100 of the 640 windows drawn
    monkeypatch.setattr(baselines, "CHUNK_WINDOWS", 7)
    sampled = count_baselines(train, val, V, (0, 40, BATCH, SEQ), 8, [40]).iloc[0]
    assert sampled["bigram_weight"] != whole["bigram_weight"]
    assert sampled["bigram_weight"] == pytest.approx(whole["bigram_weight"], abs=0.05)
    assert sampled["unigram_loss"] == pytest.approx(whole["unigram_loss"], rel=1e-12)  # counts: every pair
    bigram, _ = direct_bigram_loss(train, val, 40, sampled["bigram_weight"])
    assert sampled["bigram_loss"] == pytest.approx(bigram, rel=1e-12)


def test_a_corpus_baseline_counts_every_training_window_once(chain):
    """A local model's tables: the bigram of every training window once (no draws), interpolated at the weight
    the held-out folds choose, and the unigram, as a direct NumPy count gives them."""
    train, val, _, _ = chain
    row = baselines.corpus_baselines(train, val, V, 8, BATCH, SEQ).iloc[0]
    n = (len(train) - 1) // SEQ
    windows = np.stack([train[w * SEQ : (w + 1) * SEQ + 1].astype(np.int64) for w in range(n)])
    pairs = np.zeros((V, V))
    np.add.at(pairs, (windows[:, :-1].ravel(), windows[:, 1:].ravel()), 1)
    unigram = (pairs.sum(axis=0) + 1) / (pairs.sum() + V)
    conditional = pairs / np.maximum(pairs.sum(axis=1, keepdims=True), 1)
    x, y = validation_pairs(val, 8, BATCH, SEQ)
    weight = row["bigram_weight"]
    p = np.where(pairs.sum(axis=1)[x] > 0, weight * conditional[x, y] + (1 - weight) * unigram[y], unigram[y])
    assert 0.9 < weight < 1 and row["step"] == 0 and row["positions"] == n * SEQ
    assert row["bigram_loss"] == pytest.approx(float(-np.log(p).mean()), rel=1e-12)
    assert row["unigram_loss"] == pytest.approx(float(-np.log(unigram[y]).mean()), rel=1e-12)

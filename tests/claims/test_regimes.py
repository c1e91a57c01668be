"""Claims across regimes (tying.claims.regimes): the common token set is the intersection it claims to be, and the
per-token claims on it are the planted tokens' means."""

import pandas as pd
import pytest

from tying.claims.regimes import Build, common_tokens, common_values, regimes_table

SEEDS = (0, 1)


def planted_build(tmp_path, label, strings, drawn):
    """A Build of pair `main` whose tokenizer maps ids to `strings` and whose token set of each seed holds
    {token id: draws} of `drawn[seed]` (absent ids: not analysed)."""
    directory = tmp_path / label
    (directory / "results" / "token_sets" / "main").mkdir(parents=True)
    for seed, counts in drawn.items():
        pd.DataFrame({"token_id": list(counts), "drawn": list(counts.values())}).to_parquet(
            directory / "results" / "token_sets" / "main" / f"seed{seed}.parquet"
        )
    build = Build(label, directory, "main", pd.DataFrame(), tuple(drawn))
    build.strings = dict(enumerate(strings))
    return build


def test_the_common_tokens_are_those_every_seed_of_every_build_drew_often_enough(tmp_path):
    a = planted_build(
        tmp_path, "a", ["a", "b", "c", "d"], {0: {0: 200, 1: 150, 2: 50, 3: 300}, 1: {0: 120, 1: 90, 2: 500, 3: 100}}
    )
    b = planted_build(
        tmp_path, "b", ["d", "a", "x", "c"], {0: {0: 100, 1: 99, 2: 1000, 3: 1000}, 1: {0: 100, 2: 1000, 3: 1000}}
    )  # "a" not analysed
    assert common_tokens([a], 100) == ["a", "d"]
    assert common_tokens([b], 100) == ["c", "d", "x"]
    assert common_tokens([a, b], 100) == ["d"]
    assert common_tokens([a, b], 50) == ["c", "d"]


def per_token_frames(values):
    """Metric frames of pair `main` whose per-token claim values are `values` {token id: v} in every seed: C1 and
    C7 held out, output/input sides v and 0; C2 overlaps v and 0; C4 input drift 1 - v... per matrix."""
    alignment, knn, evolution, scaling = [], [], [], []
    for seed in SEEDS:
        for token, v in values.items():
            for target in ("true", "permuted"):
                alignment += [
                    {
                        "pair": "main",
                        "seed": seed,
                        "step": 10,
                        "map": "linear",
                        "scored": "held_out",
                        "target": target,
                        "comparison": c,
                        "token_id": token,
                        "cosine": x,
                    }
                    for c, x in (("output_u->tied", v + seed), ("input_u->tied", 0.0))
                ]
                scaling += [
                    {
                        "pair": "main",
                        "seed": seed,
                        "step": 10,
                        "variant": var,
                        "reference": ref,
                        "scored": "held_out",
                        "target": target,
                        "token_id": token,
                        "cosine": x,
                    }
                    for var, ref, x in (
                        ("tied_x5", "input_u", v),
                        ("tied", "input_u", 0.0),
                        ("tied_x5", "output_u", 0.0),
                        ("tied", "output_u", v),
                    )
                ]
            knn += [
                {
                    "pair": "main",
                    "seed": seed,
                    "step": 10,
                    "k": 10,
                    "comparison": c,
                    "token_id": token,
                    "overlap": x,
                    "null_overlap": 0.0,
                }
                for c, x in (("tied_vs_output_u", v), ("tied_vs_input_u", 0.0))
            ]
            evolution += [
                {"run": "main", "seed": seed, "matrix": m, "step": 10, "token_id": token, "drift": x}
                for m, x in (("input", 0.9), ("output", 0.9 - v))
            ]
    return {
        name: pd.DataFrame(rows)
        for name, rows in (
            ("alignment", alignment),
            ("knn", knn),
            ("evolution_tokens", evolution),
            ("scaling_tokens", scaling),
        )
    }


def test_the_per_token_claims_on_the_common_tokens_are_their_planted_means(tmp_path):
    build = planted_build(tmp_path, "a", ["a", "b", "c"], {s: {0: 500, 1: 500, 2: 5} for s in SEEDS})
    frames = per_token_frames({0: 0.1, 1: 0.3, 2: 0.9})
    build.frames = frames.__getitem__
    statistics, drifts, counts = common_values(build, ["a", "b"])
    assert statistics["C1"].values.tolist() == pytest.approx([0.2, 1.2])  # v + seed, over tokens a and b
    assert statistics["C2"].values.tolist() == pytest.approx([0.2, 0.2])
    assert statistics["C4"].values.tolist() == pytest.approx([0.2, 0.2])
    assert statistics["C7a"].values.tolist() == pytest.approx([0.2, 0.2])
    assert statistics["C7b"].values.tolist() == pytest.approx([-0.2, -0.2])
    assert drifts["C4 input drift"].tolist() == pytest.approx([0.9, 0.9])
    assert drifts["C4 output drift"].tolist() == pytest.approx([0.7, 0.7])
    assert counts == (2, 2)


def test_the_table_says_when_the_regimes_share_too_few_tokens(tmp_path, monkeypatch):
    a = planted_build(tmp_path, "a", ["a", "b"], {s: {0: 500, 1: 500} for s in SEEDS})
    b = planted_build(tmp_path, "b", ["c", "d"], {s: {0: 500, 1: 500} for s in SEEDS})
    monkeypatch.setattr("tying.claims.regimes.own_rows", lambda build: {"C1": f"{build.label} value"})
    table = regimes_table([a, b]).set_index("claim")
    assert table.loc["C1", "a"] == "a value" and table.loc["C1", "b"] == "b value"
    assert table.loc["tokens", "a"] == "too few" and "(0 tokens)" in table.loc["tokens", "token set"]

"""Preconditions: a claim measured outside the regime it describes is "not testable here", with the reason."""

import numpy as np
import pandas as pd

from tying.claims.definitions import ALL_TOKENS
from tying.claims.preconditions import MIN_BIN_TOKENS, PEAK_DRAWS, ROOM_BITS, apply, pair_checks, peak_draws
from tying.claims.report import claims_tables
from tying.claims.statistics import claim_statistics
from tying.claims.verdicts import claims_table

SEEDS = (0, 1, 2, 3, 4)


def quality(offset):
    """Quality rows of a pair whose three models sit `offset` nats from a 4.0-nat bigram table (seed jitter)."""
    rows = [
        {
            "pair": "main",
            "seed": s,
            "role": role,
            "arch": "olmo",
            "variant": role,
            "step": 1000,
            "val_loss": 4.0 + offset + 0.01 * s,
            "unigram_loss": 6.0,
            "bigram_loss": 4.0,
            "bigram_weight": 0.8,
        }
        for s in SEEDS
        for role in ("tied", "untied", "tied_x5")
    ]
    frame = pd.DataFrame(rows)
    return frame.assign(margin=frame["val_loss"] - frame["bigram_loss"])


def lens(untied_bits):
    """Lens rows of a 4-block pair: untied KL `untied_bits` at every state, the tied model 0.3 bits above."""
    return pd.DataFrame(
        [
            {
                "pair": "main",
                "role": role,
                "seed": s,
                "layer": layer,
                "lens": "tuned",
                "kl_bits": untied_bits + (0.3 + 0.01 * s) * (role == "tied"),
            }
            for s in SEEDS
            for role in ("tied", "untied")
            for layer in range(5)
        ]
    )


def checked(quality_frame, lens_frame):
    stats = claim_statistics(quality=quality_frame, lens=lens_frame, pair="main")
    table = claims_table(stats, pair="main").assign(token_set=ALL_TOKENS)
    return apply(table, pair_checks(table, "main", lens=lens_frame)).set_index("claim")


def test_c3_is_not_testable_on_models_worse_than_their_bigram_table():
    worse, better = checked(quality(+0.3), lens(2.0)), checked(quality(-0.5), lens(2.0))
    assert worse.loc["LM", "verdict"] == "does not hold"
    assert worse.loc["C3", "verdict"] == "not testable here"
    assert worse.loc["C3", "testable"] == "no: language model: LM 0.320 [0.300, 0.340] nats (does not hold)"
    assert better.loc["LM", "verdict"] == "holds" and better.loc["C3", "testable"] == "yes"
    assert better.loc["C3", "verdict"] == "holds"  # the planted +0.3-bit gap, now measurable
    assert "untied early-state KL 2.00 bits" in better.loc["C3", "detail"]


def test_the_claims_rule_applies_the_preconditions_to_its_table():
    """claims_tables, what the claims rule writes: the report, then each claim's preconditions."""
    options = {
        "pairs": ["main"],
        "knn_k": 10,
        "early_steps": None,
        "scaled_variant": "tied_x5",
        "released": [],
        "at_paper_scale": False,
        "mixture": None,
        "norm_shuffles": 200,
        "comparable_draws": 100,
    }
    for offset, c3 in ((+0.3, "not testable here"), (-0.5, "holds")):
        table, seeds = claims_tables({"quality": quality(offset), "lens": lens(2.0)}, {}, options)
        rows = table.set_index("claim")
        assert rows.loc["C3", "verdict"] == c3 and (rows["token_set"] == ALL_TOKENS).all()
        assert sorted(seeds["claim"].unique()) == ["C3", "C3s0", "LM"] and len(seeds) == 3 * len(SEEDS)


def test_c3_needs_room_for_a_gap_in_the_untied_models_early_states():
    flat = checked(quality(-0.5), lens(ROOM_BITS / 4))
    assert flat.loc["C3", "verdict"] == "not testable here"
    assert flat.loc["C3", "testable"] == "no: room for a gap: untied early-state KL 0.25 bits"
    assert flat.loc["C3s0", "testable"] == flat.loc["C3", "testable"]  # C3 at state 0 needs what C3 needs
    assert flat.loc["LM", "testable"] == "yes"  # LM itself needs nothing


def norm_freq(top_draws):
    """Norm-frequency rows of three seeds: 200 tokens drawn 10-999 times and 12 tokens drawn `top_draws` times."""
    drawn = np.r_[np.linspace(10, 999, 200).astype(int), np.full(12, top_draws)]
    return pd.DataFrame(
        [
            {"pair": "main", "seed": s, "matrix": m, "token_id": i, "drawn": d, "norm": 1.0}
            for s in range(3)
            for m in ("untied_input", "untied_output", "tied")
            for i, d in enumerate(drawn)
        ]
    )


def test_c6b_needs_draws_that_reach_the_papers_peak():
    short, long = peak_draws(norm_freq(PEAK_DRAWS - 1), "main"), peak_draws(norm_freq(3 * PEAK_DRAWS), "main")
    assert not short.passed and short.seen == "0 tokens drawn >= 10,000 times (most drawn: 9,999)"
    assert long.passed and long.seen == "12 tokens drawn >= 10,000 times (most drawn: 30,000)"
    assert MIN_BIN_TOKENS <= 12
    table = pd.DataFrame({"pair": "main", "claim": ["C6a", "C6b"], "verdict": "does not hold", "detail": ""})
    for frame, verdict in (
        (norm_freq(PEAK_DRAWS - 1), "not testable here"),
        (norm_freq(3 * PEAK_DRAWS), "does not hold"),
    ):
        out = apply(table, {"main": {"peak draws": peak_draws(frame, "main")}}).set_index("claim")
        assert out.loc["C6b", "verdict"] == verdict and out.loc["C6a", "verdict"] == "does not hold"

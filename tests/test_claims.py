"""Claim statistics per seed, verdicts, and the claims table on constructed metric frames."""
import math

import numpy as np
import pandas as pd
import pytest

from tying import claims
from tying.errors import PipelineError


@pytest.mark.parametrize(
    "values, expected",
    [
        ([0.1, 0.2, 0.15], "holds"),  # every seed above the threshold
        ([-0.1, -0.2, -0.15], "does not hold"),  # every seed below
        ([-0.2, 0.3, -0.1, 0.25], "inconclusive"),  # the CI straddles the threshold
        ([0.05], "holds"),  # one seed: its side decides
        ([-0.05], "does not hold"),
    ],
)
def test_verdict_from_seed_values(values, expected):
    table = claims.claims_table({"C1": pd.Series(values)})
    assert table.loc[0, "verdict"] == expected
    assert table.loc[0, "n_seeds"] == len(values)


def test_verdict_uses_the_claims_threshold():
    # C5 claims an output share above 0.5: 0.6 holds, 0.4 does not.
    assert claims.claims_table({"C5": pd.Series([0.6, 0.62])}).loc[0, "verdict"] == "holds"
    assert claims.claims_table({"C5": pd.Series([0.4, 0.42])}).loc[0, "verdict"] == "does not hold"
    assert claims.verdict(0.5, math.nan, math.nan, 0.5) == "inconclusive"


def _alignment():
    """Seed s: output_u->tied mean 0.7 + 0.1 s, input_u->tied mean 0.5 (linear); gap 0.2 + 0.1 s."""
    rows = []
    for seed in (0, 1):
        for comparison, mean in (("output_u->tied", 0.7 + 0.1 * seed), ("input_u->tied", 0.5), ("input_u->output_u", 0.0)):
            for map_, shift in (("linear", 0.0), ("orthogonal", -0.3)):
                for token, offset in enumerate((-0.1, 0.1)):
                    rows.append(("main", seed, 300, comparison, map_, token, mean + shift + offset))
    return pd.DataFrame(rows, columns=["pair", "seed", "step", "comparison", "map", "token_id", "cosine"])


def test_alignment_gap_is_paired_per_seed():
    assert claims.alignment_gap(_alignment()).to_dict() == pytest.approx({0: 0.2, 1: 0.3})


def test_knn_gap_at_k():
    knn = pd.DataFrame(
        [("main", s, 300, c, k, v + 0.01 * k) for s in (0, 1) for k in (5, 10)
         for c, v in (("tied_vs_input_u", 0.4), ("tied_vs_output_u", 0.7 - 0.1 * s), ("input_u_vs_output_u", 0.3))],
        columns=["pair", "seed", "step", "comparison", "k", "overlap"],
    )
    assert claims.knn_gap(knn, k=10).to_dict() == pytest.approx({0: 0.3, 1: 0.2})
    with pytest.raises(PipelineError):
        claims.knn_gap(knn, k=20)
    with pytest.raises(PipelineError):
        claims.knn_gap(knn[knn["comparison"] != "tied_vs_output_u"])


def test_drift_gap_at_last_step():
    rows = [("main", s, m, step, drift, math.nan if step == 0 else 0.9)
            for s in (0, 1) for step in (0, 100, 200)
            for m, drift in (("input", 1 - step / 1000), ("output", 1 - step / 400 - 0.1 * s))]
    evolution = pd.DataFrame(rows, columns=["run", "seed", "matrix", "step", "drift", "change"])
    # step 200: input 0.8, output 0.5 - 0.1 s
    assert claims.drift_gap(evolution).to_dict() == pytest.approx({0: 0.3, 1: 0.4})


def test_output_share_over_first_steps():
    rows = [("main", s, "tied", step, 1.0, 1.0, 1.0, 1.0, 1 - share, share)
            for s in (0, 1) for step, share in enumerate([0.8, 0.6, 0.1, 0.1])]
    grad_flow = pd.DataFrame(rows, columns=["pair", "seed", "variant", "step", "g_in", "g_out",
                                            "g_in_roll", "g_out_roll", "in_share", "out_share"])
    assert claims.output_share(grad_flow, steps=2).tolist() == pytest.approx([0.7, 0.7])
    assert claims.output_share(grad_flow).tolist() == pytest.approx([0.4, 0.4])


def test_norm_shape_gap_from_shape_stats():
    # Output and tied norms rise with count (rho = 1), input norms fall (rho = -1): gap 2.
    counts = np.array([1, 10, 100, 1000, 10000])
    norms = {"untied_input": 2.0 - counts / 1e5, "untied_output": np.log10(counts) + 1, "tied": np.sqrt(counts)}
    rows = [("main", seed, m, t, c, n) for seed in (0, 1) for m, ns in norms.items()
            for t, (c, n) in enumerate(zip(counts, ns))]
    norm_freq = pd.DataFrame(rows, columns=["pair", "seed", "matrix", "token_id", "count", "norm"])
    assert claims.norm_shape_gap(norm_freq).to_dict() == pytest.approx({0: 2.0, 1: 2.0})


def test_scaling_shift_matches_the_papers_arithmetic():
    cos = {("tied", "input_u"): 0.216, ("tied", "output_u"): 0.384, ("tied_x5", "input_u"): 0.222, ("tied_x5", "output_u"): 0.369}
    scaling = pd.DataFrame(
        [("main", 0, 300, v, r, c) for (v, r), c in cos.items()] + [("main", 0, 100, v, r, 0.0) for v, r in cos],
        columns=["pair", "seed", "step", "variant", "reference", "cosine"],
    )
    assert claims.scaling_shift(scaling).to_dict() == pytest.approx({0: 0.021})


def test_claims_table_rows_columns_and_markdown(tmp_path):
    lens = pd.DataFrame({"pair": ["main", "main", "family"], "seed": [0, 1, 0], "gap_bits": [1.5, 2.5, 9.0]})
    statistics = claims.claim_statistics(alignment=_alignment(), lens=lens)
    table = claims.claims_table(statistics)
    assert table["claim"].tolist() == ["C1", "C3"]  # claims without input are omitted
    c1 = table.iloc[0]
    assert c1["ours"] == "0.250 ± 0.050" and c1["verdict"] == "holds"
    assert (c1["ci_low"], c1["ci_high"]) == pytest.approx((0.2, 0.3))
    assert c1["paper"] == "0.719 vs 0.525 (+0.194)" and c1["criterion"].endswith("> 0")
    claims.write_claims(table, tmp_path / "claims.parquet", tmp_path / "claims.md")
    assert pd.read_parquet(tmp_path / "claims.parquet")["mean"].tolist() == pytest.approx([0.25, 2.0])
    md = (tmp_path / "claims.md").read_text().splitlines()
    assert md[0] == "| claim | description | paper | ours | n_seeds | criterion | verdict |"
    assert md[2].startswith("| C1 | ") and md[2].endswith(" | 0.250 ± 0.050 | 2 | " + c1["criterion"] + " | holds |")


def test_paper_scale_is_one_more_input():
    ours = {"C1": pd.Series([0.2, 0.3]), "C2": pd.Series([0.1]), "C5": pd.Series([0.7])}
    paper_scale = {"C1": pd.Series([0.19]), "C2": pd.Series([0.30])}
    table = claims.claims_table(ours, paper_scale=paper_scale).set_index("claim")
    assert table.loc["C1", "paper_scale"] == "0.190"
    assert not table.loc["C1", "paper_scale_differs"]  # |0.190 - 0.194| <= 0.02
    assert table.loc["C2", "paper_scale_differs"]  # |0.300 - 0.237| > 0.02
    assert pd.isna(table.loc["C5", "paper_scale_differs"])  # no paper-scale value, no tolerance
    assert "paper_scale" not in claims.claims_table(ours).columns


def test_unknown_claim_is_an_error():
    with pytest.raises(PipelineError):
        claims.claims_table({"C9": pd.Series([1.0])})

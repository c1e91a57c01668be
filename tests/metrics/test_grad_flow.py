import pandas as pd
import pytest
from helpers import grad_flow_summary

from tying.errors import PipelineError
from tying.metrics.grad_flow import grad_flow_frame


def provenance(steps=50):
    step = list(range(1, steps + 1))
    g_in = [1.0] * steps
    g_out = [float(s % 4 + 1) for s in step]  # 2, 3, 4, 1, 2, ...: ratio g_out / g_in
    return pd.DataFrame(
        {
            "step": step[::-1],  # unordered input
            "loss": 1.0,
            "g_in_raw": 0.5,
            "g_in": g_in,
            "g_out": g_out[::-1],
            "out_share": 0.0,
            "proxy": 3.0,
            "input_grad_scale": 2.0,
        }
    )


def test_shares_rolling_means_and_first_steps():
    frame = grad_flow_frame(provenance(), steps=40)
    assert list(frame.columns) == [
        "step",
        "g_in",
        "g_out",
        "proxy",
        "g_in_roll",
        "g_out_roll",
        "in_share",
        "out_share",
        "proxy_out_share",
    ]
    assert frame["step"].tolist() == list(range(1, 41))
    assert (frame["in_share"] + frame["out_share"]).tolist() == pytest.approx([1.0] * 40)
    row = frame.set_index("step").loc[3]  # g_out = 4, g_in = 1
    assert row["out_share"] == pytest.approx(0.8)
    assert row["proxy_out_share"] == pytest.approx(3 / (3 + 3))  # rolling means: g_out 3 so far, proxy 3
    assert row["g_out_roll"] == pytest.approx((2 + 3 + 4) / 3)  # fewer than 20 steps so far
    # Steps 21..40 hold five full cycles of 2, 3, 4, 1: mean 2.5.
    assert frame.set_index("step").loc[40, "g_out_roll"] == pytest.approx(2.5)
    assert frame["g_in_roll"].tolist() == pytest.approx([1.0] * 40)


def test_summary_ratios():
    summary = grad_flow_summary(grad_flow_frame(provenance(), steps=40))
    assert summary["mean_ratio"] == pytest.approx(2.5)
    assert summary["median_ratio"] == pytest.approx(2.5)
    assert summary["mean_out_share"] == pytest.approx((2 / 3 + 3 / 4 + 4 / 5 + 1 / 2) / 4)


def test_missing_columns_or_steps_are_errors():
    with pytest.raises(PipelineError, match="g_out"):
        grad_flow_frame(provenance().drop(columns="g_out"), steps=10)
    with pytest.raises(PipelineError, match="no step"):
        grad_flow_frame(provenance(), steps=0)


def test_proxy_share_is_the_authors_share_of_rolling_means():
    # Norms falling 20x over the first steps: the share of rolling means is not the mean of per-step shares.
    steps = 60
    frame = pd.DataFrame(
        {
            "step": range(1, steps + 1),
            "g_in": 1.0,
            "g_out": [4.0 * 0.95**s for s in range(steps)],
            "proxy": [20.0 * 0.9**s for s in range(steps)],
        }
    )
    ours = grad_flow_frame(frame, steps=30)["proxy_out_share"].mean()
    # The authors' plot_gradient_provenance.py, its input side the proxy:
    df = frame[frame["step"] <= 30]
    emb = df["proxy"].rolling(window=20, min_periods=1).mean().values
    out = df["g_out"].rolling(window=20, min_periods=1).mean().values
    theirs = (100.0 * out / (emb + out + 1e-10)).mean() / 100
    assert ours == pytest.approx(theirs, rel=1e-12)
    per_step = (df["g_out"] / (df["proxy"] + df["g_out"])).mean()
    assert abs(ours - per_step) > 0.05

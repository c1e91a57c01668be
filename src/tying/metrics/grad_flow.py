"""Gradient flow into a tied matrix: lookup path vs projection path (Figure 4).

Reads the training provenance of a tied run: per step the Frobenius norms g_in (lookup
path, effective, after any input scale) and g_out (projection path) of the two parts of
the shared matrix's gradient, and `proxy`, the norm of dL/d(embedding output) that the
paper's code took for the input side.
"""

from tying.errors import PipelineError

WINDOW = 20
REQUIRED = ("step", "g_in", "g_out", "proxy")


def grad_flow_frame(provenance, steps, window=WINDOW):
    """Tidy norms, rolling means and shares over the first `steps` steps.

    provenance: frame with columns step, g_in, g_out, proxy (others ignored). Rolling means
    are trailing, over `window` steps (fewer at the start). in_share = g_in / (g_in + g_out),
    out_share = g_out / (g_in + g_out), summing to 1; proxy_out_share, the share as the paper's
    code (`plot_gradient_provenance.py`) measured it: of the rolling means, g_out_roll /
    (proxy_roll + g_out_roll + 1e-10), with proxy for the input side.
    Returns columns step, g_in, g_out, proxy, g_in_roll, g_out_roll, in_share, out_share, proxy_out_share.
    """
    missing = [c for c in REQUIRED if c not in provenance.columns]
    if missing:
        raise PipelineError(f"provenance lacks column(s) {', '.join(missing)}")
    frame = provenance.loc[provenance["step"] <= steps, list(REQUIRED)].sort_values("step", ignore_index=True)
    if frame.empty:
        raise PipelineError(f"provenance has no step <= {steps}")
    total = frame["g_in"] + frame["g_out"]
    roll = {c: frame[c].rolling(window, min_periods=1).mean() for c in ("g_in", "g_out", "proxy")}
    return frame.assign(
        g_in_roll=roll["g_in"],
        g_out_roll=roll["g_out"],
        in_share=frame["g_in"] / total,
        out_share=frame["g_out"] / total,
        proxy_out_share=roll["g_out"] / (roll["proxy"] + roll["g_out"] + 1e-10),
    )

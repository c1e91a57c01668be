"""The paper's numbers, as the claims table and the paper tables print them beside ours (METHODS.md's).

CLAIMS: claim id -> (what the paper reports, as text; its value of the claim's statistic, NaN where the
paper gives none); CLAIM_RANGES: the range it gives instead of one value. FIG2_KL: Figure 2's tuned-lens
curves, whose early half is C3 and whose state 0 is C3s0. TABLE1 .. TABLE7: the tables' cells, keyed as
tying.report.tables reads them.
"""

import math

CLAIMS = {
    "C1": ("0.719 vs 0.525 (+0.194), in sample", 0.194),
    "C2": ("0.733 vs 0.496 at k=10 (+0.237)", 0.237),
    "C3": ("states 0-7 of 16: mean 5.66 vs 4.64 bits (+1.01); input layer 8.86 vs 7.01", 1.014),
    "C4": ("OLMo-1B-0724 at 20k: input 0.87 vs output 0.56 (+0.31)", 0.31),
    "C5": ("70-83% over the first 1000 of 10000 steps", math.nan),
    "C6a": ("qualitative: input flat near its initial value", math.nan),
    "C6b": ("qualitative: rise up to ~1e4 occurrences, then fall", math.nan),
    "C6c": ("qualitative: input flat near its initial value", math.nan),
    "C7a": ("10k steps, x5: 0.222 - 0.216 = +0.006, in sample", 0.006),
    "C7b": ("10k steps, x5: 0.369 - 0.384 = -0.015, in sample", -0.015),
}
# C4's two parts: OLMo-1B-0724's final drift (cosine to step 0) of its input and its output matrix, by step 20k.
DRIFT = {"input": 0.87, "output": 0.56}
# Claims the paper gives as a range of its statistic rather than one value (C5: 70-83% output share).
CLAIM_RANGES = {"C5": (0.70, 0.83), "C5p": (0.70, 0.83)}

# Figure 2: tuned-lens KL (bits) at states 0 (the input embedding) .. 16, OLMo-1B (tied) and OLMo-1B-0724
# (untied); C3 is the mean over states 0-7, the first half of the 16 layers (tying.claims.statistics).
FIG2_KL = {
    "tied": (8.86, 9.61, 6.42, 4.91, 4.37, 4.06, 3.61, 3.41, 3.30, 2.95, 2.72, 2.30, 2.18, 2.52, 2.79, 1.37, 2.06),
    "untied": (7.01, 6.64, 4.84, 4.21, 3.90, 3.74, 3.52, 3.28, 3.11, 2.88, 2.53, 2.14, 1.98, 1.68, 1.31, 0.83, 0.18),
}
FIG2_LAYERS = len(FIG2_KL["tied"]) - 1  # 16
FIG2_GAP = tuple(t - u for t, u in zip(FIG2_KL["tied"], FIG2_KL["untied"]))  # per state, tied minus untied


def fig2_gap_at(fraction):
    """Figure 2's gap at a fraction of its depth (state / 16; 0 the embedding, 1 the output), linear between its
    states: where a model of another depth's state s of L (fraction s / L) sits in the paper's."""
    position = min(max(fraction, 0.0), 1.0) * FIG2_LAYERS
    low = min(int(position), FIG2_LAYERS - 1)
    return FIG2_GAP[low] + (position - low) * (FIG2_GAP[low + 1] - FIG2_GAP[low])


# C3s0: Figure 2's gap at state 0, the input embedding (C3's "input layer").
CLAIMS["C3s0"] = (
    f"state 0 of {FIG2_LAYERS}: {FIG2_KL['tied'][0]:.2f} vs {FIG2_KL['untied'][0]:.2f} bits "
    f"({FIG2_KL['tied'][0] - FIG2_KL['untied'][0]:+.2f})",
    FIG2_KL["tied"][0] - FIG2_KL["untied"][0],
)
# The lens budgets behind Figure 2, (optimiser steps, tokens a step): tuned-lens 0.2's `train` defaults
# (scripts/train_loop.py: num_steps 250, tokens_per_step 2**18) and what the authors ran
# (experiments/2_tuned_lens/train_olmo_lens.sh: NUM_STEPS=500, TOKENS_PER_STEP=131072).
LENS_BUDGETS = {"tuned-lens 0.2's default": (250, 2**18), "the authors' lenses": (500, 131_072)}

# (pair, comparison, map) -> value; Table 1 (in sample). Pairs: main = OLMo, family = GPT-Neo/Pythia.
TABLE1 = {
    (pair, comparison, m): value
    for pair, block in {
        "main": {
            "input_u->output_u": (0.012, 0.440, 0.574),
            "output_u->tied": (0.014, 0.669, 0.719),
            "input_u->tied": (0.001, 0.420, 0.525),
        },
        "family": {
            "input_u->output_u": (-0.001, 0.456, 0.518),
            "output_u->tied": (0.001, 0.507, 0.637),
            "input_u->tied": (0.000, 0.376, 0.507),
        },
    }.items()
    for comparison, values in block.items()
    for m, value in zip(("identity_uncentred", "orthogonal", "linear"), values)
}
# (pair, comparison) -> KNN@10 overlap; Table 5. scale = Qwen3.
TABLE5 = {
    (pair, comparison): value
    for pair, values in {
        "main": (0.496, 0.733, 0.455),
        "scale": (0.366, 0.712, 0.366),
        "family": (0.372, 0.408, 0.611),
    }.items()
    for comparison, value in zip(("tied_vs_input_u", "tied_vs_output_u", "input_u_vs_output_u"), values)
}
# (variant, reference) -> orthogonal cosine; Table 2 (10k steps) and Table 6 (1k steps).
TABLE2 = {
    ("tied", "input_u"): "0.216",
    ("tied", "output_u"): "0.384",
    ("tied_x5", "input_u"): "0.222",
    ("tied_x5", "output_u"): "0.369",
}
TABLE6 = {
    ("tied", "input_u"): "0.172",
    ("tied", "output_u"): "0.197",
    ("tied_x2", "input_u"): "0.172-0.173",
    ("tied_x2", "output_u"): "0.197",
    ("tied_x10", "input_u"): "0.173",
    ("tied_x10", "output_u"): "0.190",
}
# (arch, variant, metric) -> WikiText-2 perplexity; Table 7 (OLMo-1B at 10k steps).
TABLE7_PERPLEXITY = {("olmo", "tied", "perplexity"): "35.71", ("olmo", "tied_x5", "perplexity"): "36.64"}

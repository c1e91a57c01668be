"""The paper's claims: what each measures, the paper's number (tying.paper), and its criterion.

A claim says "statistic > threshold" (or "<"); tying.claims.statistics computes each claim's statistic per
seed, tying.claims.verdicts summarises it over seeds with a verdict.
"""

import math
from dataclasses import dataclass

import pandas as pd

from tying import paper as published
from tying.metrics.norm_frequency import BINS_PER_DECADE, MIN_BIN_TOKENS

FLAT_SPREAD = 0.25  # C6a: the input's binned mean norms vary by less than a quarter of their median
NEAR_INITIAL = 0.25  # C6c: no bin's mean input norm moves by a quarter of its step-0 value
NORM_SHUFFLES = 200  # C6b's chance level: shuffles of the norms across tokens, per seed
CHANCE_QUANTILE = 0.95  # C6b must rise and fall by more than this quantile of its shuffled values


@dataclass(frozen=True)
class Claim:
    """One paper claim: what is measured, the paper's numbers, and the criterion."""

    description: str
    statistic: str
    paper: str
    paper_value: float  # the paper's value of the statistic (NaN: none)
    threshold: float = 0.0
    tolerance: float = math.nan  # paper-scale vs paper difference that gets flagged (NaN: no flag)
    direction: str = ">"
    title: str = ""  # a figure panel's title
    unit: str = ""  # the statistic's unit, a figure axis's label

    @property
    def criterion(self):
        return f"{self.statistic} {self.direction} {self.threshold:g}"

    def on_side(self, value):
        """True where `value` is on the claimed side of the threshold."""
        return value > self.threshold if self.direction == ">" else value < self.threshold


@dataclass(frozen=True)
class Statistic:
    """A claim's values: per seed (the verdict's), and where defined in sample, at chance, per token."""

    values: pd.Series
    in_sample: pd.Series = None
    chance: pd.Series = None
    per_token: pd.Series = None  # one seed's per-token values, for a single released pair
    detail: str = ""  # what the verdict alone does not say (C6b: where the peak is)
    interval: tuple = None  # (low, high, how): in place of the seeds' t-interval (C3: seeds and windows)
    verdict: str = ""  # in place of the interval's verdict (C3: "lens not converged")
    level: pd.Series = None  # per seed, the weight decay's no-gradient level the value sits beside (C6a, C6c)


CLAIMS = {
    "LM": Claim(
        "The pair's models predict held-out text better than a bigram table of the tokens they drew",
        "largest over the pair's models of validation loss minus the interpolated bigram table's, on the same "
        "targets (nats)",
        "not in the paper (its models are trained language models)",
        math.nan,
        direction="<",
        title="LM: worst model − bigram table",
        unit="Δ validation loss (nats)",
    ),
    "C1": Claim(
        "The tied matrix aligns better with the untied output matrix than with the untied input matrix",
        "held-out mean linear-map cosine Output(U)->Tied minus Input(U)->Tied (maps fitted on 80% of tokens)",
        *published.CLAIMS["C1"],
        tolerance=0.02,
        title="C1: Out(U)→T − In(U)→T",
        unit="Δ mean cosine",
    ),
    "C2": Claim(
        "The tied matrix's nearest neighbours match Output(U)'s more than Input(U)'s",
        "KNN@k overlap Tied vs Output(U) minus Tied vs Input(U)",
        *published.CLAIMS["C2"],
        tolerance=0.02,
        title="C2: KNN@k Out − In",
        unit="Δ overlap (share)",
    ),
    "C3": Claim(
        "The tied model's early layers are further from the output space (tuned lens)",
        "tied minus untied mean tuned-lens KL over the early half of the states (bits)",
        *published.CLAIMS["C3"],
        tolerance=0.2,
        title="C3: tuned-lens KL tied − untied, early",
        unit="Δ KL (bits)",
    ),
    "C3s0": Claim(
        "The tied model's embedding state is further from the output space (tuned lens)",
        "tied minus untied held-out tuned-lens KL at state 0, the embedding output (bits); detail: the same above "
        "each model's state-0 floors (tying.lens.floor)",
        *published.CLAIMS["C3s0"],
        tolerance=0.2,
        title="C3s0: tuned-lens KL tied − untied, state 0",
        unit="Δ KL (bits)",
    ),
    "C4": Claim(
        "In an untied run the output matrix moves further from its initialisation than the input matrix",
        "final-step drift (cosine to step 0) of input minus output, untied run",
        *published.CLAIMS["C4"],
        title="C4: drift In − Out, untied",
        unit="Δ cosine to step 0",
    ),
    "C5": Claim(
        "The output path dominates the tied matrix's gradient early in training",
        "mean output share ||G_out|| / (||G_in|| + ||G_out||) over the early steps, tied run",
        *published.CLAIMS["C5"],
        threshold=0.5,
        title="C5: output share of tied gradient, early",
        unit="share of ‖G‖",
    ),
    "C5p": Claim(
        "C5 as the paper's code measured it",
        "mean over the early steps of R(||G_out||) / (R(||dL/d embedding output||) + R(||G_out||)), R a trailing "
        "20-step rolling mean (the authors' plot_gradient_provenance.py), tied run",
        *published.CLAIMS["C5"],
        threshold=0.5,
        title="C5p: C5 as the authors' code computes it",
        unit="share of ‖G‖ (rolling)",
    ),
    "C6a": Claim(
        "Untied input row norms stay flat across token frequency",
        f"spread of the untied input's binned mean norm: (max - min) / median over 1/{BINS_PER_DECADE}-decade "
        f"bins of log10 draws (how often the run drew the token), a bin of < {MIN_BIN_TOKENS} tokens merged with "
        "its rarer neighbours within half a decade (every analysed token in a bin)",
        *published.CLAIMS["C6a"],
        threshold=FLAT_SPREAD,
        direction="<",
        title="C6a: untied input norms flat",
        unit="(max − min) / median",
    ),
    "C6b": Claim(
        "Untied output and tied row norms rise with frequency and then fall",
        "min over untied output and tied of min(rise, fall) of the binned mean norm (bins as C6a), each relative "
        "to the peak bin (0 when the peak is the first or last bin), minus its 95th percentile with the norms "
        "shuffled across tokens (the seed's own chance level); detail: the peak bins' draws",
        *published.CLAIMS["C6b"],
        threshold=0.0,
        title="C6b: output, tied norms rise then fall",
        unit="min(rise, fall) − chance",
    ),
    "C6c": Claim(
        "Untied input row norms stay near their initial value",
        "largest relative change |final / (step-0 x (1 - level)) - 1| of the untied input's binned mean norm "
        "(bins as C6a): against the same tokens' step-0 norms shrunk by the run's no-gradient level, where weight "
        "decay alone leaves a row no gradient reaches (raw |final / step-0 - 1| in the detail)",
        *published.CLAIMS["C6c"],
        threshold=NEAR_INITIAL,
        direction="<",
        title="C6c: untied input norms near step 0",
        unit="largest relative change",
    ),
    "C7a": Claim(
        "Scaling the input-path gradient moves the tied matrix toward Input(U)",
        "cos(x_k, In) - cos(tied, In), orthogonal Procrustes, held out",
        *published.CLAIMS["C7a"],
        title="C7a: x5 − tied, to In(U)",
        unit="Δ cosine",
    ),
    "C7b": Claim(
        "Scaling the input-path gradient moves the tied matrix away from Output(U)",
        "cos(x_k, Out) - cos(tied, Out), orthogonal Procrustes, held out",
        *published.CLAIMS["C7b"],
        direction="<",
        title="C7b: x5 − tied, to Out(U)",
        unit="Δ cosine",
    ),
}

# Calibrated C1 and C2 (tying.claims.statistics.calibrated_statistics): the claims pair's gap minus the mixture
# control's.
CALIBRATED = {"C1cal": "C1", "C2cal": "C2"}
CLAIMS |= {
    cal: Claim(
        f"{cid} calibrated: the tied matrix is more output-like than a half-input, half-output matrix",
        f"{cid}'s statistic minus the mixture control's (the row-normalised mean of a second untied run's "
        "input and output matrices as tied), paired by seed",
        "not in the paper",
        math.nan,
        title=f"{cal}: {cid} − the mixture control's",
        unit=CLAIMS[cid].unit,
    )
    for cal, cid in CALIBRATED.items()
}
ALL_TOKENS = "all analysed"  # the token_set of the all-token rows (tying.claims.exposure adds comparable-token rows)

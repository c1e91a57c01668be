"""What each claim needs from a run, and whether this run has it.

The paper's claims are about trained language models. A claim measured on a run outside the regime it
describes gets the verdict "not testable here" and the reason, instead of a verdict its numbers cannot
carry (docs/statistics.md, "Preconditions"):

- language model: the pair's models predict held-out text better than a bigram table of the tokens they
  drew (claim LM holds: its interval lies below 0). Every claim about the trained matrices needs it;
  C5 (the gradient split over the first steps) does not.
- room for a gap (C3, C3s0): the untied model's mean tuned-lens KL over the early states is at least ROOM_BITS,
  the size of the paper's gap. Below it an affine map of the early states already predicts nearly all the
  model predicts, so no gap of the paper's kind can show.
- peak draws (C6b): at least MIN_BIN_TOKENS analysed tokens drawn PEAK_DRAWS times or more in every seed,
  a bin of draws at and past the paper's peak, so that a fall after it can be seen.

A local pair (both models directories on disk) has its models but neither their training run nor their training
data: its table lists the claims that need those as "not testable here" with the reason (`with_unmeasured`).
"""

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tying.claims.definitions import ALL_TOKENS, CLAIMS
from tying.claims.statistics import early_layer_gap
from tying.frames import only
from tying.metrics.norm_frequency import MIN_BIN_TOKENS

ROOM_BITS = 1.0
PEAK_DRAWS = 10_000
LM = "LM"


@dataclass(frozen=True)
class Check:
    """Whether a run meets one precondition, and what was seen."""

    passed: bool
    seen: str


NEEDS = {  # claim -> the preconditions it needs, in the order they are checked
    **{cid: ("language model",) for cid in ("C1", "C2", "C4", "C6a", "C6c", "C7a", "C7b", "C1cal", "C2cal")},
    **{cid: ("language model", "room for a gap") for cid in ("C3", "C3s0")},
    "C6b": ("language model", "peak draws"),
}
NEEDS_TEXT = {
    "language model": "models beyond the bigram table (LM holds)",
    "room for a gap": f"untied early-state tuned-lens KL >= {ROOM_BITS:g} bit",
    "peak draws": f">= {MIN_BIN_TOKENS} tokens drawn >= {PEAK_DRAWS:,} times",
}


NO_RUN = "no training run here: the tied model's gradient over its first steps is the training's"
NO_DATA = "no training data here: how often training drew each token is unknown"
UNMEASURED = {  # claim -> why a local pair's table cannot measure it
    "C4": "no checkpoints of the untied model (pairs.<pair>.evolution: training step -> directory)",
    "C5": NO_RUN,
    "C5p": NO_RUN,
    "C6a": NO_DATA,
    "C6b": NO_DATA,
    "C6c": NO_DATA,
    "C7a": "no input-gradient-scaled tied runs: only a pair the pipeline trains has them",
}
UNMEASURED["C7b"] = UNMEASURED["C7a"]


def needs_text(cid):
    """What claim `cid` needs from a run, as text ("" for nothing)."""
    return "; ".join(NEEDS_TEXT[n] for n in NEEDS.get(cid, ()))


def language_model(lm_row):
    """The language-model check from the claims table's LM row: its verdict holds or, with too few seeds for an
    interval verdict (direction only), every seed's models beat their table."""
    direction = lm_row["verdict"].startswith("direction only") and lm_row["seeds_on_side"] == lm_row["n_seeds"]
    return Check(lm_row["verdict"] == "holds" or direction, f"LM {lm_row['ours']} nats ({lm_row['verdict']})")


def room_for_gap(lens, pair):
    """The room check from the lens metric (pair, role, seed, layer, lens, kl_bits): the untied model's mean
    tuned-lens KL over the early states (those C3 averages), mean over seeds."""
    bits = early_layer_gap(only(lens, pair=pair))["untied_bits"].mean()
    return Check(bool(bits >= ROOM_BITS), f"untied early-state KL {bits:.2f} bits")


def peak_draws(norm_freq, pair):
    """The peak-draws check from the norm-frequency metric (matrix, token_id, drawn per pair and seed): the
    fewest tokens, over seeds, drawn PEAK_DRAWS times or more, and the most any token was drawn."""
    rows = only(norm_freq, pair=pair, matrix="tied")
    past = rows.assign(past=rows["drawn"] >= PEAK_DRAWS).groupby("seed")["past"].sum()
    fewest, most = int(past.min()), int(rows["drawn"].max())
    return Check(fewest >= MIN_BIN_TOKENS, f"{fewest} tokens drawn >= {PEAK_DRAWS:,} times (most drawn: {most:,})")


def pair_checks(table, first, lens=None, norm_freq=None):
    """{pair: {precondition: Check}}: each pair's language-model check from its LM row in the claims `table`,
    and the first pair's room and peak-draws checks from its lens and norm-frequency metrics where given."""
    rows = table[(table["claim"] == LM) & (table["token_set"] == ALL_TOKENS)]
    checks = {pair: {"language model": language_model(row)} for pair, row in zip(rows["pair"], rows.to_dict("records"))}
    first_checks = checks.setdefault(first, {})
    if lens is not None:
        first_checks["room for a gap"] = room_for_gap(lens, first)
    if norm_freq is not None:
        first_checks["peak draws"] = peak_draws(norm_freq, first)
    return checks


def testable(cid, checks):
    """ "yes", or "no: ..." naming each failed precondition of claim `cid` and what was seen; `checks`:
    {precondition: Check} of the pair (a missing one is not checked)."""
    failed = [
        f"{name}: {checks[name].seen}" for name in NEEDS.get(cid, ()) if name in checks and not checks[name].passed
    ]
    return "no: " + "; ".join(failed) if failed else "yes"


def apply(table, checks):
    """`table` (claims rows: pair, claim, verdict, detail) with columns needs and testable, the verdict "not
    testable here" where a precondition fails, and what the room and peak-draws checks saw added to the
    detail of the claims that need them; `checks`: {pair: {precondition: Check}} (pair_checks)."""
    status = [testable(cid, checks.get(pair, {})) for pair, cid in zip(table["pair"], table["claim"])]
    detail = [
        _with_seen(text, cid, checks.get(pair, {}))
        for pair, cid, text in zip(table["pair"], table["claim"], table["detail"].fillna(""))
    ]
    verdict = np.where([s.startswith("no") for s in status], "not testable here", table["verdict"])
    return table.assign(needs=table["claim"].map(needs_text), testable=status, verdict=verdict, detail=detail)


def _with_seen(detail, cid, checks):
    seen = [checks[name].seen for name in NEEDS.get(cid, ()) if name != "language model" and name in checks]
    return "; ".join([d for d in (detail, *seen) if d])


def with_unmeasured(table, pair):
    """`table` with a row for each claim of UNMEASURED it has none for `pair` (a local pair): verdict "not testable
    here", testable "no: " and the reason, what it needs; the pair's rows then in CLAIMS order."""
    missing = [cid for cid in UNMEASURED if cid not in set(table.loc[table["pair"] == pair, "claim"])]
    rows = pd.DataFrame(
        [
            {
                "pair": pair,
                "claim": cid,
                "description": CLAIMS[cid].description,
                "paper": CLAIMS[cid].paper,
                "ours": "",
                "criterion": CLAIMS[cid].criterion,
                "verdict": "not testable here",
                "detail": "",
                "paper_value": CLAIMS[cid].paper_value,
                "token_set": ALL_TOKENS,
                "needs": needs_text(cid),
                "testable": "no: " + UNMEASURED[cid].replace("<pair>", pair),
            }
            for cid in missing
        ]
    )
    table = pd.concat([table, rows], ignore_index=True)
    rank = {cid: i for i, cid in enumerate(CLAIMS)}
    pairs = {name: i for i, name in enumerate(pd.unique(table["pair"]))}
    order = table.assign(_p=table["pair"].map(pairs), _c=table["claim"].map(rank)).sort_values(
        ["_p", "_c"], kind="stable"
    )
    return table.loc[order.index].reset_index(drop=True)

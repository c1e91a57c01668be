"""Every claim across training regimes side by side, and the per-token claims on one token set common to all of them
(docs/results/regimes.md, its table of record).

Regimes differ in the size-free numbers of their training (tying.plan.size_free), in their tokenizer (the default
corpus's BPE and the docstrings corpus's) and in how often their runs drew each token, so each regime's claims
table reads its claims on tokens of its own. Beside those values (its first pair, all analysed tokens, with C4's
two drifts given apart and C3 also under tuned-lens's optimiser at 500 steps where the build swept it), the
per-token claims C1, C2, C4 (and its input and output drift), C7a and C7b are taken again on the common tokens:
the token strings every regime's tokenizer has and every run of every seed of every regime drew at least `draws`
times. Within a seed, the mean over the common tokens (the held-out ones, for the fitted C1 and C7); over seeds,
the claims table's Student-t 95% interval and verdict.

    .venv/bin/python -m tying.claims.regimes [--draws 100] default=runs/default paper-regime=runs/paper-regime ...

Each LABEL=DIRECTORY is a build's working directory (a config's runs/<name>/) holding its claims table.
"""

import argparse
import re
import sys
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import pandas as pd

from tying.claims.definitions import ALL_TOKENS, CLAIMS
from tying.claims.exposure import seed_statistics, token_values
from tying.claims.verdicts import claims_table
from tying.errors import PipelineError
from tying.frames import at_step, markdown
from tying.paper import CLAIMS as PAPER
from tying.paper import DRIFT as PAPER_DRIFT
from tying.stats import format_cell, mean_ci

PER_TOKEN = ("C1", "C2", "C4", "C7a", "C7b")
DRIFTS = {"C4 input drift": "input", "C4 output drift": "output"}
LENS_BUDGET = ("tuned_lens", 500)  # the authors' lenses: tuned-lens's optimiser, 500 steps
RAW = re.compile(r"decay included \(\|final / step-0 - 1\|\): (.*)$")


@dataclass
class Build:
    """A build's working directory, its claims table's first pair and that pair's seeds."""

    label: str
    directory: Path
    pair: str
    claims: pd.DataFrame
    seeds: tuple

    def path(self, *parts):
        return self.directory.joinpath("results", *parts)

    def frames(self, metric):
        """The pair's per-seed frames of a metric (results/metrics/<metric>/<pair>/seed<s>.parquet), one frame."""
        return pd.concat(
            [pd.read_parquet(self.path("metrics", metric, self.pair, f"seed{s}.parquet")) for s in self.seeds],
            ignore_index=True,
        )

    @cached_property
    def strings(self):
        """{token id: its string} of the build's tokenizer."""
        from tying.data.tokenizer import load  # here: a regimes table without per-token rows needs no transformers

        vocab = load(self.path("tokenizer")).get_vocab()
        return {i: s for s, i in vocab.items()}

    def drawn(self):
        """Each analysed token's fewest draws over the pair's runs, per seed: frame seed, token_id, drawn."""
        return pd.concat(
            [
                pd.read_parquet(
                    self.path("token_sets", self.pair, f"seed{s}.parquet"), columns=["token_id", "drawn"]
                ).assign(seed=s)
                for s in self.seeds
            ],
            ignore_index=True,
        )


def read_build(label, directory):
    """The Build of a working directory: its results/tables/claims.parquet's first pair and that pair's seeds."""
    directory = Path(directory)
    path = directory / "results" / "tables" / "claims.parquet"
    if not path.is_file():
        raise PipelineError(f"{label}: {directory} holds no claims table ({path}); build it first")
    claims = pd.read_parquet(path)
    pair = claims["pair"].iloc[0]
    seeds = sorted(
        int(p.stem.removeprefix("seed"))
        for p in (directory / "results" / "token_sets" / pair).glob("seed*.parquet")
        if not p.stem.endswith("_by_step")
    )
    if not seeds:
        raise PipelineError(f"{label}: {directory} has no token sets of pair {pair!r} (results/token_sets/{pair}/)")
    return Build(label, directory, pair, claims[claims["pair"] == pair], tuple(seeds))


def common_tokens(builds, draws):
    """The token strings every build's tokenizer has and every seed of every build drew at least `draws` times
    (its token set's `drawn`, the fewest over the pair's runs) -> sorted list."""
    common = None
    for build in builds:
        strings = build.strings
        drawn = build.drawn().pivot(index="token_id", columns="seed", values="drawn")
        ids = drawn.index[drawn.notna().all(axis=1) & (drawn.min(axis=1) >= draws)]
        own = {strings[i] for i in ids}
        common = own if common is None else common & own
    return sorted(common or ())


def common_values(build, strings, k=10, scaled_variant="tied_x5"):
    """Per seed, each per-token claim's mean over `strings` (by the build's ids) and the two drifts -> ({claim id:
    Statistic}, {drift row: Series by seed}, tokens a seed as (fewest, most))."""
    wanted = set(strings)
    ids = {i for i, s in build.strings.items() if s in wanted}
    keep = lambda frame: frame[frame["token_id"].isin(ids)]  # noqa: E731
    evolution = keep(build.frames("evolution_tokens"))
    values = token_values(
        build.pair,
        keep(build.frames("alignment")),
        keep(build.frames("knn")),
        evolution,
        keep(build.frames("scaling_tokens")),
        k=k,
        scaled_variant=scaled_variant,
    )
    counts = values.groupby(["claim", "seed"]).size()
    drift = at_step(evolution, by=("run",)).groupby(["seed", "matrix"])["drift"].mean().unstack()
    return (
        seed_statistics(values),
        {row: drift[matrix] for row, matrix in DRIFTS.items()},
        (int(counts.min()), int(counts.max())),
    )


def own_rows(build):
    """{row: cell} of a build's own claims table (all analysed tokens), with the drifts apart and C3 at the
    authors' lens budget where the build swept it."""
    claims = build.claims[build.claims["token_set"] == ALL_TOKENS].set_index("claim")
    cells = {cid: f"{row.ours} {row.verdict}".strip() for cid, row in claims.iterrows()}
    if "C6c" in claims.index and RAW.search(claims.loc["C6c", "detail"] or ""):
        cells["C6c raw"] = RAW.search(claims.loc["C6c", "detail"]).group(1)
    drift = at_step(build.frames("evolution"), by=("run",)).groupby(["seed", "matrix"])["drift"].mean().unstack()
    cells |= {row: format_cell(*mean_ci(drift[matrix])) for row, matrix in DRIFTS.items()}
    budget = build.path("tables", "lens_budget.parquet")
    if budget.is_file():
        sweep = pd.read_parquet(budget)
        row = sweep[
            (sweep["comparison"] == sweep["comparison"].iloc[0])
            & (sweep["procedure"] == LENS_BUDGET[0])
            & (sweep["steps"] == LENS_BUDGET[1])
        ]
        if len(row):
            r = row.iloc[0]
            cells["C3 tuned-lens 500"] = (
                format_cell(r.c3_mean, r.c3_ci_low, r.c3_ci_high) + f" ({int(r.tokens):,} tokens)"
            )
    return cells


def paper_cells():
    """{row: the paper's value as text} for the rows the paper reports."""
    cells = {cid: claim.paper for cid, claim in CLAIMS.items()}
    cells["C3 tuned-lens 500"] = PAPER["C3"][0]
    return cells | {row: f"{PAPER_DRIFT[matrix]:.2f}" for row, matrix in DRIFTS.items()}


OWN_ORDER = [
    "LM",
    "C1",
    "C2",
    "C3",
    "C3s0",
    "C3 tuned-lens 500",
    "C4",
    *DRIFTS,
    "C5",
    "C5p",
    "C6a",
    "C6b",
    "C6c",
    "C6c raw",
    "C7a",
    "C7b",
]


def regimes_table(builds, draws=100, k=10):
    """One row per (token set, claim): the paper's value, then per build its value with interval and verdict.

    Rows on all analysed tokens come from each build's claims table (OWN_ORDER); rows on the common tokens
    (common_tokens at `draws`) from the builds' per-token metrics, with a `tokens` row giving how many common
    tokens each seed scored."""
    paper, own = paper_cells(), {b.label: own_rows(b) for b in builds}
    rows = [
        {
            "token set": ALL_TOKENS,
            "claim": r,
            "paper": paper.get(r, ""),
            **{b.label: own[b.label].get(r, "") for b in builds},
        }
        for r in OWN_ORDER
        if any(r in own[b.label] for b in builds)
    ]
    strings = common_tokens(builds, draws)
    label = f"common: drawn >= {draws} in every regime ({len(strings)} tokens)"
    if len(strings) < 2:
        return pd.DataFrame(
            rows + [{"token set": label, "claim": "tokens", "paper": "", **{b.label: "too few" for b in builds}}]
        )
    common = {b.label: common_values(b, strings, k=k) for b in builds}
    for cid in [*PER_TOKEN[:3], *DRIFTS, *PER_TOKEN[3:]]:
        cells = {}
        for b in builds:
            statistics, drifts, _ = common[b.label]
            if cid in statistics:
                row = claims_table({cid: statistics[cid]}).iloc[0]
                cells[b.label] = f"{row.ours} {row.verdict}"
            else:
                cells[b.label] = format_cell(*mean_ci(drifts[cid])) if cid in drifts else ""
        rows.append({"token set": label, "claim": cid, "paper": paper.get(cid, ""), **cells})
    counts = {
        b.label: f"{common[b.label][2][0]:,}-{common[b.label][2][1]:,} a seed (held out for C1, C7)" for b in builds
    }
    return pd.DataFrame(rows + [{"token set": label, "claim": "tokens", "paper": "", **counts}])


def main(argv):
    parser = argparse.ArgumentParser(prog="python -m tying.claims.regimes", description=__doc__.split("\n\n")[0])
    parser.add_argument("builds", nargs="+", metavar="LABEL=DIRECTORY")
    parser.add_argument("--draws", type=int, default=100, help="the common tokens' fewest draws (default 100)")
    parser.add_argument("--k", type=int, default=10, help="the builds' analysis.knn_k (default 10)")
    args = parser.parse_args(argv)
    builds = []
    for arg in args.builds:
        label, sep, directory = arg.partition("=")
        if not sep:
            raise PipelineError(f"expected LABEL=DIRECTORY, got {arg!r}")
        builds.append(read_build(label, directory))
    sys.stdout.write(markdown(regimes_table(builds, args.draws, args.k)))


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except (PipelineError, OSError) as err:
        sys.exit(f"error: {err}")

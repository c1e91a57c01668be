"""Claims tables of builds that differ in one choice, side by side (docs/results/recipe.md).

One row per claim of each table's first pair on all analysed tokens; per build its value with interval and its
verdict, and where its table gives one (C6a, C6c) the weight decay's no-gradient level; `verdict changes` says
whether any build's verdict differs from the first's.

    .venv/bin/python -m tying.claims.side_by_side LABEL=results/tables/claims.parquet ... > table.md

A build's claims table is its claims.parquet, or a table of record (docs/results/*.md): the first Markdown table
in it whose header starts with `| pair | claim |`.
"""

import re
import sys

import pandas as pd

from tying.claims.definitions import ALL_TOKENS
from tying.errors import PipelineError
from tying.frames import markdown


def side_by_side(tables):
    """{label: claims table (results/tables/claims.parquet)} -> one frame: claim, paper, and per label
    `<label>` (ours with its interval), `<label> no-gradient level` (tables with a level) and `<label> verdict`,
    then `verdict changes`."""
    out, order = None, []
    for label, table in tables.items():
        rows = table[(table["pair"] == table["pair"].iloc[0]) & (table["token_set"] == ALL_TOKENS)]
        levels = rows["no_gradient_level"].fillna("") if "no_gradient_level" in rows.columns else pd.Series(dtype=str)
        level = ["no_gradient_level"] if levels.ne("").any() else []
        rows = rows.set_index("claim")[["paper", "ours", *level, "verdict"]].rename(
            columns={"ours": label, "no_gradient_level": f"{label} no-gradient level", "verdict": f"{label} verdict"}
        )
        order += [c for c in rows.index if c not in order]
        out = rows if out is None else out.join(rows.drop(columns="paper"), how="outer")
    out = out.reindex(order)
    verdicts = out[[f"{label} verdict" for label in tables]]
    out["verdict changes"] = verdicts.ne(verdicts.iloc[:, 0], axis=0).any(axis=1).map({True: "yes", False: ""})
    return out.reset_index()


def read_claims(path):
    """A claims table from its Parquet file or from the Markdown table in a table of record."""
    if not str(path).endswith(".md"):
        return pd.read_parquet(path)
    lines = open(path).read().splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("| pair | claim |")), None)
    if start is None:
        raise PipelineError(f"{path} holds no claims table (a line starting with '| pair | claim |')")
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", line.strip()[1:-1])])
    return pd.DataFrame(rows[2:], columns=rows[0])


def main(argv):
    tables = {}
    for arg in argv:
        label, sep, path = arg.partition("=")
        if not sep:
            raise PipelineError(f"expected LABEL=CLAIMS.parquet, got {arg!r}")
        tables[label] = read_claims(path)
    if not tables:
        raise PipelineError("usage: python -m tying.claims.side_by_side LABEL=CLAIMS.parquet ...")
    sys.stdout.write(markdown(side_by_side(tables)))


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except (PipelineError, OSError) as err:
        sys.exit(f"error: {err}")

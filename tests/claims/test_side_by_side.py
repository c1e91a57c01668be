"""Claims tables of two builds side by side: each claim's value and verdict per build, and which verdicts change."""

import subprocess
import sys

import pandas as pd

from tying.claims.side_by_side import read_claims, side_by_side
from tying.frames import markdown


def table(pair, values):
    rows = [
        {
            "pair": pair,
            "claim": claim,
            "token_set": token_set,
            "paper": f"paper {claim}",
            "ours": ours,
            "verdict": verdict,
        }
        for claim, token_set, ours, verdict in values
    ]
    return pd.DataFrame(
        rows
        + [
            {
                "pair": "control",
                "claim": "C1",
                "token_set": "all analysed",
                "paper": "",
                "ours": "0.0",
                "verdict": "does not hold",
            }
        ]
    )


A = table(
    "main",
    [
        ("LM", "all analysed", "-0.4", "holds"),
        ("C1", "all analysed", "0.38", "holds"),
        ("C1", "drawn >= 100", "0.36", "holds"),
        ("C6a", "all analysed", "0.82", "does not hold"),
    ],
)
B = table(
    "main",
    [
        ("LM", "all analysed", "-0.4", "holds"),
        ("C1", "all analysed", "0.35", "holds"),
        ("C6a", "all analysed", "0.34", "inconclusive"),
        ("C3", "all analysed", "0.1", "holds"),
    ],
)


def test_each_claim_of_the_first_pair_once_with_each_builds_value_and_verdict():
    out = side_by_side({"olmo": A, "hf": B}).set_index("claim")
    assert list(out.index) == ["LM", "C1", "C6a", "C3"]  # the first table's order, then claims only the second has
    assert out.loc["C1", ["paper", "olmo", "hf"]].tolist() == ["paper C1", "0.38", "0.35"]
    assert out.loc["C6a", ["olmo verdict", "hf verdict", "verdict changes"]].tolist() == [
        "does not hold",
        "inconclusive",
        "yes",
    ]
    assert out.loc["LM", "verdict changes"] == "" and out.loc["C3", "verdict changes"] == "yes"


def test_the_command_writes_markdown_and_refuses_a_bad_argument(tmp_path):
    A.to_parquet(tmp_path / "a.parquet")
    B.to_parquet(tmp_path / "b.parquet")
    run = [sys.executable, "-m", "tying.claims.side_by_side"]
    out = subprocess.run(
        run + [f"olmo={tmp_path / 'a.parquet'}", f"hf={tmp_path / 'b.parquet'}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.splitlines()[0] == "| claim | paper | olmo | olmo verdict | hf | hf verdict | verdict changes |"
    bad = subprocess.run(run + [str(tmp_path / "a.parquet")], capture_output=True, text=True)
    assert bad.returncode == 1 and bad.stderr.startswith("error: expected LABEL=CLAIMS.parquet")


def test_a_table_of_record_reads_back_as_the_table_it_shows(tmp_path):
    shown = A.assign(detail=["max |change| 0.01", "", "", "", ""])
    record = tmp_path / "record.md"
    record.write_text("# A table of record\n\nIts provenance.\n\n" + markdown(shown) + "\nA note after it.\n")
    back = read_claims(record)
    assert back.columns.tolist() == shown.columns.tolist()
    assert back.astype(str).values.tolist() == shown.astype(str).values.tolist()  # "|" in a cell survives
    assert side_by_side({"record": back, "hf": B}).set_index("claim").loc["C1", "record"] == "0.38"


def test_a_table_with_the_no_gradient_level_shows_it_beside_its_values():
    decayed = A.assign(no_gradient_level=["", "", "", "0.731", ""])
    out = side_by_side({"wd 0.1": decayed, "total decay 0.164": B.assign(no_gradient_level="")}).set_index("claim")
    assert list(out.columns) == [
        "paper",
        "wd 0.1",
        "wd 0.1 no-gradient level",
        "wd 0.1 verdict",
        "total decay 0.164",
        "total decay 0.164 verdict",
        "verdict changes",
    ]
    assert out.loc["C6a", "wd 0.1 no-gradient level"] == "0.731" and out.loc["C1", "wd 0.1 no-gradient level"] == ""

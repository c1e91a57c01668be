"""The README's result numbers are quoted from the claims tables of record under docs/results/.

In the README's results section, a paragraph that links a table of record (docs/results/*.md) and the
paragraphs after it, up to the next such link, quote that table: every decimal number in them must be
written in it.
"""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SECTION = "## What the default run finds, in short"
RECORD = re.compile(r"\]\((docs/results/[\w.-]+\.md)\)")
DECIMAL = re.compile(r"(?<![\w.])[-+]?\d+\.\d+")


def unquoted(readme, root=ROOT):
    """(record, number) for each decimal in the results section that its table of record does not hold."""
    section = readme.split(SECTION, 1)[1].split("\n## ", 1)[0]
    out, record = [], None
    for paragraph in section.split("\n\n"):
        record = next(iter(RECORD.findall(paragraph)), record)
        if record is None:
            continue
        table = (root / record).read_text()
        for number in DECIMAL.findall(paragraph):
            if not re.search(rf"(?<![\w.]){re.escape(number.lstrip('+'))}(?![\d])", table):
                out.append((record, number))
    return out


def test_readme_results_are_in_the_tables_of_record():
    readme = (ROOT / "README.md").read_text()
    assert RECORD.search(readme.split(SECTION, 1)[1]), "the results section links no table of record"
    assert unquoted(readme) == []


def test_a_number_not_in_the_table_is_flagged():
    readme = (ROOT / "README.md").read_text().replace("0.348 [0.341, 0.355]", "0.358 [0.341, 0.355]")
    assert unquoted(readme) == [("docs/results/claims.md", "0.358")]

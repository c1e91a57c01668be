"""CITATION.cff is valid Citation File Format 1.2.0 and names the paper it reproduces.

tests/cff-1.2.0.schema.json is the format's own schema (github.com/citation-file-format/
citation-file-format, schema.json, CC BY 4.0), kept here so the check needs no network.
"""

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "tests" / "cff-1.2.0.schema.json").read_text())


def test_citation_file_is_valid_cff():
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    jsonschema.Draft7Validator(SCHEMA).validate(citation)
    paper = citation["references"][0]
    assert paper["url"] == "https://arxiv.org/abs/2603.26663"
    assert [a["family-names"] for a in paper["authors"]] == ["Lopardo", "Harish", "Arnett", "Gupta"]


def test_the_schema_rejects_a_citation_without_authors():
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    del citation["authors"]
    with pytest.raises(jsonschema.ValidationError, match="authors"):
        jsonschema.Draft7Validator(SCHEMA).validate(citation)

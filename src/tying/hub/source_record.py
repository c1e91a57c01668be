"""The record a hub fetch writes beside what it read (`dest`/source.json: repository, revision, commit,
files), and the commit read back from it; free of the hub client, so reading it imports no torch."""

import json
from pathlib import Path

from tying.errors import PipelineError

SOURCE_RECORD = "source.json"


def source_commit(hub_dir):
    """The commit a hub fetch read, from its record `hub_dir`/source.json."""
    path = Path(hub_dir) / SOURCE_RECORD
    try:
        return json.loads(path.read_text())["commit"]
    except (OSError, ValueError, KeyError) as err:
        raise PipelineError(f"{path}: no fetch record with the commit read ({type(err).__name__})") from None

"""A config's hub references and which of them are not pinned to a commit: checked while the DAG is built,
so a config that names a branch warns before any job runs (pinning itself: tying.hub.revisions)."""

import re

from tying.plan.pairs import pair_refs

COMMIT = re.compile(r"[0-9a-f]{40}")
PIN_COMMAND = "python -m tying.hub.revisions pin CONFIG"


def hub_references(config):
    """[(where, repo id, repo type, revision)] of the config's hub references: each pair's tied and
    untied hub model ("pairs.PAIR.ROLE") and an `hf` corpus ("corpus"); a missing revision is main."""
    refs = []
    for pair in config.get("pairs", {}):
        for role, ref in pair_refs(config, pair).items():
            if ref.pin:
                repo, revision = ref.pin
                refs.append((f"pairs.{pair}.{role}", repo, "model", revision))
    corpus = config.get("corpus", {})
    if corpus.get("source") == "hf":
        refs.append(("corpus", corpus["path"], "dataset", corpus.get("revision") or "main"))
    return refs


def unpinned_references(config):
    """["where: repo@revision"] of the config's hub references whose revision is not a 40-character commit."""
    return [f"{where}: {repo}@{rev}" for where, repo, _, rev in hub_references(config) if not COMMIT.fullmatch(rev)]

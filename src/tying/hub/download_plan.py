"""Downloads sized before they start: the bytes each hub fetch job of each target will read.

The fetch jobs of a target are the hub_embeddings and hub_model jobs in its DAG, as
`snakemake TARGET --summary` lists them (no job runs); each is sized by `tying.hub.fetch.plan_fetch`
from the hub's file listing and the checkpoint's headers, a few small range reads per file.
"""

import re
import subprocess
import sys
import tempfile

import pandas as pd
import yaml

from tying.errors import PipelineError
from tying.hub.fetch import plan_fetch
from tying.io import atomic_path

FETCH_RULES = {"hub_embeddings": True, "hub_model": False}  # rule -> embeddings_only
FETCH_DIR = re.compile(r"results/hub/(?:embeddings|full)/([^/]+/[^/]+)/([^/]+)")
GB = 1e9


def fetch_jobs(summary):
    """[(rule, repo_id, revision, status)] of the fetch jobs in a `snakemake --summary` table."""
    rows = [line.split("\t") for line in summary.splitlines() if "\t" in line]
    header = rows[0] if rows else []
    jobs = []
    for row in rows[1:]:
        fields = dict(zip(header, row))
        match = FETCH_DIR.fullmatch(fields.get("output_file", ""))
        if fields.get("rule") in FETCH_RULES and match:
            jobs.append((fields["rule"], *match.groups(), fields["status"]))
    return sorted(jobs)


def target_fetch_jobs(targets, snakefile, config):
    """{target: fetch_jobs(...)} from `snakemake TARGET --summary` run on `snakefile` with `config`
    (the running workflow's, written to a temporary config file) in the current directory."""
    out = {}
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as configfile:
        yaml.safe_dump(config, configfile)
        configfile.flush()
        for target in targets:
            result = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "snakemake",
                    "-s",
                    str(snakefile),
                    "--configfile",
                    configfile.name,
                    "--summary",
                    target,
                ],
                capture_output=True,
                text=True,
            )
            if result.returncode:
                raise PipelineError(
                    f"snakemake --summary {target} failed: " + (result.stderr.strip().splitlines() or [""])[-1]
                )
            out[target] = fetch_jobs(result.stdout)
    return out


def plan_jobs(jobs_by_target):
    """One row per fetch job and file it reads: target(s), rule, repo_id, revision, commit, status,
    file, bytes; every distinct job sized once with `plan_fetch`."""
    rows, plans = [], {}
    for target, jobs in jobs_by_target.items():
        for rule, repo_id, revision, status in jobs:
            key = rule, repo_id, revision
            if key not in plans:
                plans[key] = plan_fetch(repo_id, revision, FETCH_RULES[rule])
            rows += [
                {
                    "target": target,
                    "rule": rule,
                    "repo_id": repo_id,
                    "revision": revision,
                    "commit": plans[key]["commit"],
                    "status": status,
                    "file": name,
                    "bytes": nbytes,
                }
                for name, nbytes in plans[key]["files"].items()
            ]
    return pd.DataFrame(rows, columns=["target", "rule", "repo_id", "revision", "commit", "status", "file", "bytes"])


def summary_markdown(table):
    """Per target: its fetch jobs and the bytes they read; then every distinct job together."""
    jobs = ["rule", "repo_id", "revision"]
    lines = ["| target | fetch jobs | bytes | GB |", "|---|---|---|---|"]
    for target, rows in table.groupby("target", sort=False):
        lines.append(
            f"| {target} | {len(rows.drop_duplicates(jobs))} | {rows['bytes'].sum():,} "
            f"| {rows['bytes'].sum() / GB:.2f} |"
        )
    distinct = table.drop_duplicates([*jobs, "file"])
    lines.append(
        f"| all of them | {len(distinct.drop_duplicates(jobs))} | {distinct['bytes'].sum():,} "
        f"| {distinct['bytes'].sum() / GB:.2f} |"
    )
    return "\n".join(lines) + "\n"


def write_download_plan(targets, snakefile, config, tsv, md):
    """Size every fetch job of `targets` and write the per-file table (`tsv`) and per-target summary (`md`)."""
    table = plan_jobs(target_fetch_jobs(targets, snakefile, config))
    with atomic_path(tsv) as tmp:
        table.to_csv(tmp, sep="\t", index=False)
    with atomic_path(md) as tmp:
        tmp.write_text(summary_markdown(table))

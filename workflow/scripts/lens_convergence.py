import sys

import pandas as pd

from tying.io import write_parquet
from tying.lens.jobs import REFERENCE_FACTOR, load_job, reference_check
from tying.rule_script import run
from tying.runtime import configure
from tying.tidy import with_ids


def main(snakemake):
    """A reference lens at REFERENCE_FACTOR times lens.steps (same seed, so the same first windows), scored on
    the lens job's validation windows, against that job's held-out KL per state (C3's certificate)."""
    cfg = snakemake.params.lens
    configure(snakemake.threads)
    model, train, val = load_job(snakemake.input, cfg)
    check = reference_check(
        model, train, val, cfg, pd.read_parquet(snakemake.input.metric), seed=snakemake.params.ids["seed"]
    )
    print(
        f"lens reference, {cfg['steps']} -> {REFERENCE_FACTOR * cfg['steps']} steps: max |change| "
        f"{check['change_bits'].abs().max():.4f} bits",
        file=sys.stderr,
    )
    write_parquet(with_ids(check, snakemake.params.ids), snakemake.output[0])


run(snakemake, main)

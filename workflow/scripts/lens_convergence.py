import sys

import pandas as pd

from tying.io import write_parquet
from tying.lens import convergence, fit_and_evaluate, load_job
from tying.runtime import configure
from tying.rule_script import run
from tying.tidy import with_ids


def main(snakemake):
    """A lens trained for half of lens.steps (same seed, so the same first windows) against the lens job's
    own held-out KL on the same windows: how far the budget's second half still moved each state."""
    cfg, steps = snakemake.params.lens, snakemake.params.lens["steps"]
    configure(snakemake.threads)
    model, train, val = load_job(snakemake.input, cfg)
    _, half = fit_and_evaluate(model, train, val, cfg, seed=snakemake.params.ids["seed"], steps=steps // 2)
    check = convergence(half, pd.read_parquet(snakemake.input.metric))
    print(f"lens convergence, {steps // 2} -> {steps} steps: max |change| {check['change_bits'].abs().max():.4f} "
          "bits", file=sys.stderr)
    write_parquet(with_ids(check.assign(steps=steps), snakemake.params.ids), snakemake.output[0])


run(snakemake, main)

import math

import pandas as pd

from tying.io import write_parquet
from tying.script import run


def main(snakemake):
    rows = []
    for (arch, variant, seed), path in zip(snakemake.params.runs, snakemake.input.logs):
        log = pd.read_parquet(path).dropna(subset=["val_loss"])
        rows += [{"arch": arch, "variant": variant, "seed": seed, "step": int(r.step), "val_loss": r.val_loss,
                  "perplexity": math.exp(r.val_loss)} for r in log.itertuples()]
    write_parquet(pd.DataFrame(rows), snakemake.output[0])


run(snakemake, main)

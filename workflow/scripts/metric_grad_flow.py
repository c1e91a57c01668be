import pandas as pd

from tying.io import write_parquet
from tying.metrics.grad_flow import grad_flow_frame
from tying.rule_script import run
from tying.tidy import with_ids


def main(snakemake):
    frame = grad_flow_frame(pd.read_parquet(snakemake.input.provenance[0]), snakemake.params.steps)
    write_parquet(with_ids(frame, snakemake.params.ids), snakemake.output[0])


run(snakemake, main)

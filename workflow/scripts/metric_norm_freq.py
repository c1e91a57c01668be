import pandas as pd

from tying.embeddings import load_embeddings
from tying.io import write_parquet
from tying.norm_frequency import norm_frequency_frame
from tying.script import run
from tying.tidy import with_ids


def main(snakemake):
    inp = snakemake.input
    frame = norm_frequency_frame(load_embeddings(inp.untied), load_embeddings(inp.tied), pd.read_parquet(inp.counts))
    write_parquet(with_ids(frame, snakemake.params.ids), snakemake.output[0])


run(snakemake, main)

import pandas as pd

from tying.embeddings import load_embeddings
from tying.io import write_parquet
from tying.norm_frequency import norm_frequency_frame
from tying.script import run
from tying.tidy import with_ids


def main(snakemake):
    inp, p, rows = snakemake.input, snakemake.params, snakemake.params.analysis["rows"]
    frame = norm_frequency_frame(load_embeddings(inp.untied, rows=rows), load_embeddings(inp.tied, rows=rows),
                                 pd.read_parquet(inp.counts), min_count=p.analysis["min_count"])
    write_parquet(with_ids(frame, {**p.ids, "rows": rows}), snakemake.output[0])


run(snakemake, main)

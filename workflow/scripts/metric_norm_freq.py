import pandas as pd

from tying.checkpoints.embeddings import load_embeddings
from tying.io import write_parquet
from tying.metrics.norm_frequency import norm_frequency_frame
from tying.plan.decay import checkpoint_level
from tying.rule_script import run
from tying.tidy import with_ids


def main(snakemake):
    inp, p, rows = snakemake.input, snakemake.params, snakemake.params.analysis["rows"]
    untied, tied = load_embeddings(inp.untied, rows=rows), load_embeddings(inp.tied, rows=rows)
    initial = [load_embeddings(d, rows=rows) for d in inp.initial] or None
    levels = (checkpoint_level(inp.untied), checkpoint_level(inp.tied))
    frame = norm_frequency_frame(untied, tied, pd.read_parquet(inp.tokens), initial, levels)
    write_parquet(with_ids(frame, {**p.ids, "rows": rows}), snakemake.output[0])


run(snakemake, main)

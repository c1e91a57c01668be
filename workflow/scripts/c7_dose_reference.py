import pandas as pd

from tying.checkpoints.embeddings import load_embeddings
from tying.data.token_sets import analysed_tokens
from tying.io import write_parquet
from tying.metrics.alignment import ceiling_frame, scaling_frame
from tying.rule_script import run
from tying.runtime import configure
from tying.tidy import with_ids


def main(snakemake):
    configure(snakemake.threads)
    inp, p = snakemake.input, snakemake.params
    rows, keep = p.analysis["rows"], analysed_tokens(inp.get("tokens"))
    split = {"keep": keep, "held_out": p.analysis["held_out"], "seed": p.analysis["split_seed"]}
    untied = load_embeddings(inp.untied, rows=rows)
    frames = [
        with_ids(
            ceiling_frame(untied, load_embeddings(inp.second, rows=rows), **split),
            {**p.ids, "kind": "ceiling", "step": p.final},
        )
    ]
    frames += [
        with_ids(
            scaling_frame(load_embeddings(tied, rows=rows), untied, **split), {**p.ids, "kind": "tied", "step": step}
        )
        for step, tied in zip(p.steps, inp.tied)
    ]
    write_parquet(pd.concat(frames, ignore_index=True), snakemake.output[0])


run(snakemake, main)

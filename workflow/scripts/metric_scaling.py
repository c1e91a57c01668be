import pandas as pd
import torch

from tying.alignment import scaling_frame
from tying.embeddings import load_embeddings
from tying.io import write_parquet
from tying.script import run
from tying.tidy import with_ids


def main(snakemake):
    torch.set_num_threads(snakemake.threads)
    p, tied = snakemake.params, iter(snakemake.input.tied)
    frames = []
    for step, untied_dir in zip(p.steps, snakemake.input.untied):
        untied = load_embeddings(untied_dir)
        for variant in p.variants:
            frame = scaling_frame(load_embeddings(next(tied)), untied)
            frames.append(with_ids(frame, {**p.ids, "step": step, "variant": variant}))
    write_parquet(pd.concat(frames, ignore_index=True), snakemake.output[0])


run(snakemake, main)

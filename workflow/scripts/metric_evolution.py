import torch

from tying.embeddings import load_embeddings
from tying.evolution import evolution_frame
from tying.io import write_parquet
from tying.script import run
from tying.tidy import with_ids


def main(snakemake):
    torch.set_num_threads(snakemake.threads)
    checkpoints = ((s, load_embeddings(d)) for s, d in zip(snakemake.params.steps, snakemake.input.checkpoints))
    write_parquet(with_ids(evolution_frame(checkpoints), snakemake.params.ids), snakemake.output[0])


run(snakemake, main)

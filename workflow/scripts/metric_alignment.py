import torch

from tying.alignment import alignment_frame
from tying.embeddings import load_embeddings
from tying.io import write_parquet
from tying.script import run
from tying.tidy import with_ids


def main(snakemake):
    torch.set_num_threads(snakemake.threads)
    frame = alignment_frame(load_embeddings(snakemake.input.untied), load_embeddings(snakemake.input.tied))
    write_parquet(with_ids(frame, snakemake.params.ids), snakemake.output[0])


run(snakemake, main)

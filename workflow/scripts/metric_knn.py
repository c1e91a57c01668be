import torch

from tying.embeddings import load_embeddings
from tying.io import write_parquet
from tying.knn_overlap import knn_frame
from tying.script import run
from tying.tidy import with_ids


def main(snakemake):
    torch.set_num_threads(snakemake.threads)
    p = snakemake.params
    frame = knn_frame(load_embeddings(snakemake.input.untied), load_embeddings(snakemake.input.tied),
                      ks=(p.k,), approximate=p.approximate)
    write_parquet(with_ids(frame, p.ids), snakemake.output[0])


run(snakemake, main)

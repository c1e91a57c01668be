import torch

from tying.embeddings import load_embeddings
from tying.io import write_parquet
from tying.knn_overlap import knn_frame
from tying.script import run
from tying.tidy import with_ids
from tying.token_sets import analysed_tokens


def main(snakemake):
    torch.set_num_threads(snakemake.threads)
    inp, p = snakemake.input, snakemake.params
    untied, tied = load_embeddings(inp.untied), load_embeddings(inp.tied)
    frame = knn_frame(untied, tied, ks=(p.k,), approximate=p.approximate,
                      keep=analysed_tokens(inp, untied, p.analysis), null_seed=p.analysis["split_seed"] + 1)
    write_parquet(with_ids(frame, p.ids), snakemake.output[0])


run(snakemake, main)

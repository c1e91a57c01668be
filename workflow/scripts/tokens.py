from tying.data.tokens import join_shards
from tying.rule_script import run


def main(snakemake):
    inp, out = snakemake.input, snakemake.output
    join_shards({"train": inp.train, "val": inp.val}, inp.meta, inp.counts, out.train, out.val, out.meta, out.counts)


run(snakemake, main)

import json

from tying.data.tokens import load_ids
from tying.metrics.baselines import write_baselines
from tying.rule_script import run


def main(snakemake):
    inp, w, p = snakemake.input, snakemake.wildcards, snakemake.params
    vocab = json.loads(open(inp.meta).read())["vocab_size"]
    run_shape = tuple(int(w[k]) for k in ("seed", "steps", "batch", "seq_len"))
    write_baselines(
        load_ids(inp.train, inp.meta),
        load_ids(inp.val, inp.meta),
        vocab,
        run_shape,
        p.eval_batches,
        p.at,
        snakemake.output[0],
    )


run(snakemake, main)

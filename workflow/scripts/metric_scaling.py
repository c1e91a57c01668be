import pandas as pd

from tying.checkpoints.embeddings import load_embeddings
from tying.data.token_sets import analysed_tokens
from tying.io import write_parquet
from tying.metrics.alignment import scaling_frames
from tying.rule_script import run
from tying.runtime import configure
from tying.tidy import with_ids


def main(snakemake):
    configure(snakemake.threads)
    inp, p, rows = snakemake.input, snakemake.params, snakemake.params.analysis["rows"]
    tied, frames, tokens, keep = iter(inp.tied), [], [], analysed_tokens(inp.get("tokens"))
    for step, untied_dir in zip(p.steps, inp.untied):
        untied = load_embeddings(untied_dir, rows=rows)
        for variant in p.variants:
            frame, per_token = scaling_frames(
                load_embeddings(next(tied), rows=rows),
                untied,
                keep=keep,
                held_out=p.analysis["held_out"],
                seed=p.analysis["split_seed"],
            )
            frames.append(with_ids(frame, {**p.ids, "rows": rows, "step": step, "variant": variant}))
            tokens.append(with_ids(per_token, {**p.ids, "step": step, "variant": variant}))
    write_parquet(pd.concat(frames, ignore_index=True), snakemake.output[0])
    write_parquet(pd.concat(tokens, ignore_index=True), snakemake.output.tokens)


run(snakemake, main)

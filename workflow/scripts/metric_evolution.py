from tying.checkpoints.embeddings import load_embeddings
from tying.data.token_sets import analysed_tokens
from tying.io import write_parquet
from tying.metrics.evolution import evolution_frames
from tying.rule_script import run
from tying.runtime import configure
from tying.tidy import with_ids


def main(snakemake):
    configure(snakemake.threads)
    p, rows = snakemake.params, snakemake.params.analysis["rows"]
    tokenizer = snakemake.input.get("untied_tokenizer")  # a local untied model's own tokenizer folder
    checkpoints = (
        (s, load_embeddings(d, rows=rows, tokenizer=tokenizer)) for s, d in zip(p.steps, snakemake.input.checkpoints)
    )
    frame, per_token = evolution_frames(checkpoints, keep=analysed_tokens(snakemake.input.get("tokens")))
    write_parquet(with_ids(frame, {**p.ids, "rows": rows}), snakemake.output[0])
    write_parquet(with_ids(per_token, p.ids), snakemake.output.tokens)


run(snakemake, main)

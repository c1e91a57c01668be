from tying.checkpoints.embeddings import load_embeddings
from tying.data.token_sets import analysed_tokens
from tying.io import write_parquet
from tying.metrics.knn_overlap import knn_frame
from tying.rule_script import run
from tying.runtime import configure
from tying.tidy import with_ids


def main(snakemake):
    configure(snakemake.threads)
    inp, p, rows = snakemake.input, snakemake.params, snakemake.params.analysis["rows"]
    untied, tied = (
        load_embeddings(inp[role], rows=rows, tokenizer=inp.get(f"{role}_tokenizer")) for role in ("untied", "tied")
    )
    frame = knn_frame(
        untied,
        tied,
        ks=(p.knn_k,),
        approximate=p.approximate,
        keep=analysed_tokens(inp.get("tokens")),
        null_seed=p.analysis["split_seed"] + 1,
    )
    write_parquet(with_ids(frame, {**p.ids, "rows": rows}), snakemake.output[0])


run(snakemake, main)

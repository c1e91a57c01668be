from tying.io import write_parquet
from tying.metrics.downstream import text_perplexity
from tying.rule_script import run
from tying.runtime import configure
from tying.tidy import with_ids


def main(snakemake):
    inp, params = snakemake.input, snakemake.params
    configure(snakemake.threads)
    frame = text_perplexity(
        inp.model,
        inp.text,
        params.label,
        seq_len=params.seq_len,
        batch_size=params.batch_size,
        device=params.device,
        dtype=params.dtype,
    )
    write_parquet(with_ids(frame, params.ids), snakemake.output[0])


run(snakemake, main)

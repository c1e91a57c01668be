from tying.io import write_parquet
from tying.lens.jobs import load_job
from tying.lens.residual_share import residual_share
from tying.lens.scoring import scoring_args
from tying.rule_script import run
from tying.runtime import configure
from tying.tidy import with_ids


def main(snakemake):
    configure(snakemake.threads)
    model, _, val = load_job(snakemake.input, snakemake.params.lens)
    frame = residual_share(model, val, **scoring_args(snakemake.params.lens))
    write_parquet(with_ids(frame, snakemake.params.ids), snakemake.output[0])


run(snakemake, main)

from tying.io import write_parquet
from tying.metrics.model_quality import quality_frame
from tying.rule_script import run
from tying.tidy import with_ids


def main(snakemake):
    inp, p = snakemake.input, snakemake.params
    write_parquet(with_ids(quality_frame(p.runs, inp.logs, inp.baselines), p.ids), snakemake.output[0])


run(snakemake, main)

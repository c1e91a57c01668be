from tying.io import write_parquet
from tying.metrics.model_quality import loss_frame
from tying.rule_script import run


def main(snakemake):
    inp = snakemake.input
    write_parquet(loss_frame(snakemake.params.runs, inp.logs, inp.baselines), snakemake.output[0])


run(snakemake, main)

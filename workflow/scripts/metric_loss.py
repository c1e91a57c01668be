from tying.io import write_parquet
from tying.rule_script import run
from tying.tables import loss_frame


def main(snakemake):
    write_parquet(loss_frame(snakemake.params.runs, snakemake.input.logs), snakemake.output[0])


run(snakemake, main)

from tying.checkpoints.controls import control_model
from tying.rule_script import run


def main(snakemake):
    control_model(snakemake.input[0], snakemake.wildcards.matrix, snakemake.output[0])


run(snakemake, main)

from tying.report.figures.registry import draw
from tying.rule_script import run
from tying.tidy import read_frames


def main(snakemake):
    draw(snakemake.rule, read_frames(snakemake.input), snakemake.output[0], **dict(snakemake.params.items()))


run(snakemake, main)

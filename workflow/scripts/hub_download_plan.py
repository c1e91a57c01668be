from tying.hub.download_plan import write_download_plan
from tying.rule_script import run


def main(snakemake):
    p = snakemake.params
    write_download_plan(p.targets, p.snakefile, p.config, snakemake.output.tsv, snakemake.output.md)


run(snakemake, main)

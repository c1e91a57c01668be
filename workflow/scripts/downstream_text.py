from tying.metrics.downstream import text_documents, write_text
from tying.rule_script import run


def main(snakemake):
    write_text(text_documents(snakemake.params.text), snakemake.output[0])


run(snakemake, main)

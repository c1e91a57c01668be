from tying.claims.c3_by_width import c3_by_width, write_c3_by_width
from tying.rule_script import run
from tying.tidy import read_frames


def main(snakemake):
    inp, p = snakemake.input, snakemake.params
    table = c3_by_width(
        p.cells,
        read_frames(inp.lens),
        read_frames(inp.sweeps),
        read_frames(inp.share),
        read_frames(inp.quality),
        p.certified,
    )
    write_c3_by_width(table, snakemake.output.csv, snakemake.output.md)


run(snakemake, main)

from tying import tables
from tying.script import run
from tying.tidy import read_frames


def main(snakemake):
    frame, rule, params = read_frames(snakemake.input), snakemake.rule, snakemake.params
    if rule in ("table2", "table6"):
        table = getattr(tables, rule)(frame, params.step)
    elif rule in ("table1", "table5"):
        table = getattr(tables, rule)(frame, released=params.released)
    else:
        table = getattr(tables, rule)(frame)
    tables.write_table(table, snakemake.output.csv, snakemake.output.md)


run(snakemake, main)

from tying import tables
from tying.script import run
from tying.tidy import read_frames

def main(snakemake):
    frame, rule = read_frames(snakemake.input), snakemake.rule
    if rule == "table6":
        table = tables.table6(frame, snakemake.params.step)
    elif rule == "table2":
        table = tables.table2(frame, snakemake.params.step)
    else:
        table = getattr(tables, rule)(frame)
    tables.write_table(table, snakemake.output.csv, snakemake.output.md)

run(snakemake, main)

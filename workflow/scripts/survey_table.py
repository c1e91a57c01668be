from tying.script import run
from tying.survey import hidden_sizes, survey_table, write_survey
from tying.tidy import read_frames


def main(snakemake):
    p, models = snakemake.params, iter(snakemake.input.models)
    comparisons = []
    for c in p.run:
        d_tied, d_untied = hidden_sizes(c["pair"], next(models), next(models))
        comparisons.append({**c, "d_tied": d_tied, "d_untied": d_untied})
    skipped = [{**c, "d_tied": None, "d_untied": None} for c in p.skipped]
    alignment = read_frames(snakemake.input.alignment, map="linear", scored="held_out")  # all the survey reads
    table = survey_table(alignment, read_frames(snakemake.input.knn), comparisons, skipped)
    write_survey(table, snakemake.output.csv, snakemake.output.md, p.approximate)


run(snakemake, main)

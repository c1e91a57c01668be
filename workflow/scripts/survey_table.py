from tying.claims.survey import hidden_sizes, survey_table, write_survey
from tying.hub.source_record import source_commit
from tying.rule_script import run
from tying.tidy import read_frames


def main(snakemake):
    p, models, sources = snakemake.params, iter(snakemake.input.models), iter(snakemake.input.sources)
    comparisons = []
    for c in p.run:
        d_tied, d_untied = hidden_sizes(c["pair"], next(models), next(models))
        commit_tied, commit_untied = source_commit(next(sources)), source_commit(next(sources))
        comparisons.append(
            {**c, "d_tied": d_tied, "d_untied": d_untied, "commit_tied": commit_tied, "commit_untied": commit_untied}
        )
    skipped = [{**c, "d_tied": None, "d_untied": None, "commit_tied": None, "commit_untied": None} for c in p.skipped]
    alignment = read_frames(snakemake.input.alignment, map="linear", scored="held_out")  # all the survey reads
    table = survey_table(alignment, read_frames(snakemake.input.knn), comparisons, skipped)
    write_survey(table, snakemake.output.csv, snakemake.output.md, p.approximate)


run(snakemake, main)

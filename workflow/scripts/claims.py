import pandas as pd

from tying.claims import (claim_statistics, claims_table, further_claims, paper_scale_values, seed_table,
                          with_paper_scale, write_claims)
from tying.script import run
from tying.survey import source_commit
from tying.tidy import read_frames


def main(snakemake):
    p = snakemake.params
    inputs = dict(snakemake.input.items())
    paper_scale_path = inputs.pop("paper_scale", None)
    sources = inputs.pop("sources", None)
    further = {name: read_frames(inputs.pop(f"further_{name}")) for name in ("alignment", "knn")
               if f"further_{name}" in inputs}
    frames = {name: read_frames(paths) for name, paths in inputs.items()}
    pair, *others = p.pairs
    statistics = claim_statistics(**frames, pair=pair, k=p.k, early_steps=p.early_steps,
                                  scaled_variant=p.scaled_variant)
    rows = ", ".join(sorted({r for f in frames.values() if "rows" in f.columns for r in f["rows"].unique()}))
    table = claims_table(statistics, one_pair=p.at_paper_scale, pair=pair).assign(rows=rows)
    if sources:  # released models: the short commits their numbers came from (tied, untied)
        table = table.assign(commits=" / ".join(source_commit(d)[:7] for d in sources))
    if paper_scale_path:  # a paper-scale run's claims table
        paper_scale = pd.read_parquet(paper_scale_path)
        table = with_paper_scale(table, paper_scale_values(paper_scale)).assign(
            **{f"paper_scale_{c}": paper_scale[c].iloc[0] if c in paper_scale.columns else ""
               for c in ("rows", "commits")})
    elif p.at_paper_scale:  # this run is the paper-scale one
        table = with_paper_scale(table, paper_scale_values(table)).assign(
            paper_scale_rows=rows, paper_scale_commits=table.get("commits", ""))
    seeds = seed_table(statistics).assign(pair=pair)
    if others:
        more, more_seeds = further_claims(further["alignment"], further["knn"], others, p.k, p.released)
        table, seeds = pd.concat([table, more], ignore_index=True), pd.concat([seeds, more_seeds], ignore_index=True)
    write_claims(table, seeds, snakemake.output.parquet, snakemake.output.md, snakemake.output.seeds)


run(snakemake, main)

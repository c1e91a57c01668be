import pandas as pd

from tying.claims.exposure import read_token_sets
from tying.claims.report import claims_tables
from tying.claims.verdicts import write_claims
from tying.hub.source_record import source_commit
from tying.plan.claims import nested_inputs
from tying.rule_script import run
from tying.tidy import read_frames


def main(snakemake):
    p, inputs = snakemake.params, nested_inputs(snakemake.input.items())
    frames, further = (
        {name: read_frames(paths) for name, paths in inputs.get(group, {}).items()} for group in ("first", "further")
    )
    exposure, sources, paper_scale = inputs.get("exposure", {}), inputs.get("sources"), inputs.get("paper_scale")
    table, seeds = claims_tables(
        frames,
        further,
        dict(p.items()),
        token_sets=read_token_sets(exposure["token_sets"], p.token_sets) if p.token_sets else None,
        per_token={
            name: read_frames(exposure[name]) for name in ("evolution_tokens", "scaling_tokens") if name in exposure
        },
        commits=[source_commit(d) for d in sources] if sources else None,
        paper_scale=pd.read_parquet(paper_scale) if paper_scale else None,
    )
    write_claims(table, seeds, snakemake.output.parquet, snakemake.output.md, snakemake.output.seeds)


run(snakemake, main)

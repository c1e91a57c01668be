# The claims table with verdicts (tables.claims) and every claim at a glance (figures/claims.pdf).
from tying.plan.claims import (claims_at_paper_scale, claims_lens, claims_lens_reference, claims_metrics, claims_pairs,
                               claims_sources, flat_inputs, matched_null, matched_null_seeds, mixture_pair,
                               pair_claims_metrics)
from tying.plan.pairs import early_steps, local_pair


rule claims:
    input:
        unpack(claims_inputs),
    output:
        parquet="results/tables/claims.parquet",
        md=report("results/tables/claims.md", caption="../report/claims.rst", category="Tables"),
        seeds="results/tables/claims_seeds.parquet",
    params:
        **claims_params(lambda w: claims_pairs(config)),
    log:
        "logs/tables/claims.log",
    resources:
        mem_mb=4000,
        runtime=10,
    group:
        "tables"
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/claims.py"


# Every claim at a glance (tying.report.figures.claims_summary): claims_figure_tables above.
rule claims_figure:
    input:
        lambda w: list(claims_figure_tables().values()),
    output:
        report("figures/claims.pdf", caption="../report/claims_figure.rst", category="Figures"),
    params:
        labels=lambda w: list(claims_figure_tables()),
    log:
        "logs/figures/claims.log",
    group:
        "tables"
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/claims_figure.py"

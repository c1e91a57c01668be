# The scaling sweep (scaling; tying.plan.grid, tying.claims.scaling): each cell's claims as the claims table computes
# them, then every cell's rows in one table and figure (results/tables/scaling.{csv,md}, figures/scaling.pdf); each
# cell's claims by exposure, then every cell's strata in one table (results/tables/scaling_exposure.{csv,md}).
from tying.plan.claims import flat_inputs, pair_claims_metrics
from tying.plan.grid import SHAPE_COLUMNS


use rule claims as cell_claims with:
    input:
        unpack(cell_claims_inputs),
    output:
        parquet="results/scaling/{cell}/claims.parquet",
        md="results/scaling/{cell}/claims.md",
        seeds="results/scaling/{cell}/seeds.parquet",
    params:
        **claims_params(lambda w: [w.cell], released=[], at_paper_scale=False, mixture=None),
    log:
        "logs/scaling/{cell}/claims.log",
    group:
        "cell_{cell}"
    wildcard_constraints:
        cell="|".join(c.name for c in CELLS) or "no_cells",


rule scaling_table:
    input:
        claims=lambda w: if_built("results/tables/scaling.csv",
                                  expand(rules.cell_claims.output.parquet, cell=[c.name for c in CELLS])),
        seeds=expand(rules.cell_claims.output.seeds, cell=[c.name for c in CELLS]),
    output:
        csv=report("results/tables/scaling.csv", caption="../report/table.rst", category="Tables"),
        md="results/tables/scaling.md",
        trends="results/tables/scaling_trends.csv",
    params:
        facts=[c.facts() for c in CELLS],
    log:
        "logs/tables/scaling.log",
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/scaling_table.py"


rule scaling_figure:
    input:
        lambda w: if_built("figures/scaling.pdf", rules.scaling_table.output.csv),
    output:
        report("figures/scaling.pdf", caption="../report/scaling.rst", category="Figures"),
    log:
        "logs/figures/scaling.log",
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/scaling_figure.py"


# The claims by exposure of each scaling cell, then every cell's strata in one table: whether a trend across
# cells is the claim's or the token mix's (a 1500-step run draws each token about five times as often).
use rule claims_by_exposure as cell_exposure with:
    input:
        unpack(lambda w: exposure_inputs([w.cell])),
    output:
        csv="results/scaling/{cell}/claims_by_exposure.csv",
        md="results/scaling/{cell}/claims_by_exposure.md",
        figure="results/scaling/{cell}/claims_by_exposure.pdf",
    params:
        **exposure_params(lambda w: [w.cell]),
    log:
        "logs/scaling/{cell}/claims_by_exposure.log",
    group:
        "cell_{cell}"
    wildcard_constraints:
        cell="|".join(c.name for c in CELLS) or "no_cells",


rule scaling_exposure:
    input:
        lambda w: if_built("results/tables/scaling_exposure.csv",
                           expand(rules.cell_exposure.output.csv, cell=[c.name for c in CELLS])),
    output:
        csv=report("results/tables/scaling_exposure.csv", caption="../report/table.rst", category="Tables"),
        md="results/tables/scaling_exposure.md",
    params:
        facts=[{k: c.facts()[k] for k in SHAPE_COLUMNS} for c in CELLS],  # not the lens flags: strata need no lens
    log:
        "logs/tables/scaling_exposure.log",
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/scaling_exposure.py"

# One rule per paper table (CSV + Markdown), and the claims table with verdicts.


rule table1:
    input:
        lambda w: per_seed(rules.alignment, table_pairs("table1")),
    output:
        csv=report("results/tables/table1.csv", caption="../report/table.rst", category="Tables"),
        md="results/tables/table1.md",
    params:
        released=lambda w: released_pairs(config, table_pairs("table1")),
    log:
        "logs/tables/table1.log",
    group:
        "tables"
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/table.py"


rule table2:
    input:
        lambda w: per_seed(rules.scaling, table_pairs("table2")),
    output:
        csv=report("results/tables/table2.csv", caption="../report/table.rst", category="Tables"),
        md="results/tables/table2.md",
    params:
        step=FINAL_STEP,
    log:
        "logs/tables/table2.log",
    group:
        "tables"
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/table.py"


use rule table1 as table5 with:
    input:
        lambda w: per_seed(rules.knn, table_pairs("table5")),
    output:
        csv=report("results/tables/table5.csv", caption="../report/table.rst", category="Tables"),
        md="results/tables/table5.md",
    params:
        released=lambda w: released_pairs(config, table_pairs("table5")),
    log:
        "logs/tables/table5.log",


use rule table2 as table6 with:
    input:
        lambda w: per_seed(rules.scaling, table_pairs("table6")),
    output:
        csv=report("results/tables/table6.csv", caption="../report/table.rst", category="Tables"),
        md="results/tables/table6.md",
    params:
        step=config["analysis"]["early_step"],
    log:
        "logs/tables/table6.log",


rule table7:
    input:
        lambda w: if_built("results/tables/table7.csv", [rules.loss.output[0], *downstream_metrics()]),
    output:
        csv=report("results/tables/table7.csv", caption="../report/table.rst", category="Tables"),
        md="results/tables/table7.md",
    log:
        "logs/tables/table7.log",
    group:
        "tables"
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/table.py"


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


# The scaling sweep (tying.plan.grid): each cell's claims as the claims table computes them, then every cell's
# rows in one table and figure.
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


rule claims_by_exposure:
    input:
        unpack(lambda w: exposure_inputs(table_pairs("claims_by_exposure"))),
    output:
        csv=report("results/tables/claims_by_exposure.csv", caption="../report/table.rst", category="Tables"),
        md="results/tables/claims_by_exposure.md",
        figure=report("figures/claims_by_exposure.pdf", caption="../report/claims_by_exposure.rst",
                      category="Figures"),
    params:
        **exposure_params(lambda w: table_pairs("claims_by_exposure")),
    log:
        "logs/tables/claims_by_exposure.log",
    group:
        "tables"
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/claims_by_exposure.py"


# The same per-token claims by the share of steps that looked each token up (tying.claims.exposure): what batches
# as large as the paper's, which look nearly every row up at every step, would change.
rule claims_by_lookup:
    input:
        unpack(lambda w: exposure_inputs(table_pairs("claims_by_lookup"))),
    output:
        csv=report("results/tables/claims_by_lookup.csv", caption="../report/table.rst", category="Tables"),
        md="results/tables/claims_by_lookup.md",
    params:
        **exposure_params(lambda w: table_pairs("claims_by_lookup")) | {"edges": config["analysis"]["lookup_share_edges"]},
    log:
        "logs/tables/claims_by_lookup.log",
    group:
        "tables"
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/claims_by_lookup.py"


# C7 as a dose-response (tying.claims.dose): the pair's tied run and each input-scaled variant, one dose each; C7's
# ceilings (a second untied run against the pair's) and the tied run's cosines at each checkpoint, per seed.
rule c7_dose_reference:
    input:
        unpack(lambda w: token_set(w.pair, w.seed)),
        untied=lambda w: pair_models(config, w.pair, int(w.seed))["untied"],
        second=lambda w: reference(PAIRS[w.pair]["untied"]).as_variant(config["analysis"]["ceiling_variant"]).directory(
            int(w.seed), pair_step(config, w.pair)),
        tied=lambda w: [reference(PAIRS[w.pair]["tied"]).directory(int(w.seed), s)
                        for s in pair_schedule(config, w.pair).checkpoints],
    output:
        "results/metrics/c7_dose_reference/{pair}/seed{seed}.parquet",
    params:
        ids=lambda w: {"pair": w.pair, "seed": int(w.seed)},
        analysis=lambda w: analysis_params(config, w.pair, "rows", "held_out", "split_seed"),
        steps=lambda w: list(pair_schedule(config, w.pair).checkpoints),
        final=lambda w: pair_step(config, w.pair),
    log:
        "logs/metrics/c7_dose_reference/{pair}/seed{seed}.log",
    resources:
        mem_mb=lambda w, input: request_mb("scaling", [input.untied, input.second, *input.tied], 4000, held=2),
        runtime=30,
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/c7_dose_reference.py"


rule c7_dose:
    input:
        scaling=lambda w: per_seed(rules.scaling, table_pairs("c7_dose")),
        quality=lambda w: per_seed(rules.quality, table_pairs("c7_dose")),
        reference=lambda w: per_seed(rules.c7_dose_reference, table_pairs("c7_dose")),
        provenance=lambda w: [
            expand(rules.train.output.provenance, arch=PAIRS[table_pairs("c7_dose")]["tied"]["arch"], variant=v,
                   seed=s)[0]
            for v, s in dose_runs(table_pairs("c7_dose"))
        ],
    output:
        csv=report("results/tables/c7_dose.csv", caption="../report/table.rst", category="Tables"),
        md="results/tables/c7_dose.md",
        figure=report("figures/c7_dose.pdf", caption="../report/table.rst", category="Figures"),
    params:
        pair=lambda w: table_pairs("c7_dose"),
        runs=lambda w: dose_runs(table_pairs("c7_dose")),
        doses=lambda w: {v: float(config["variants"][v]["input_grad_scale"])
                         for v in scaled_variants(config, table_pairs("c7_dose"))},
    log:
        "logs/tables/c7_dose.log",
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/c7_dose.py"


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


# C3 against depth (scaling.c3_by_depth): each lens cell's C3 from the scaling table beside its tuned-lens KL per
# state (tying.claims.depth).
rule c3_by_depth_table:
    input:
        scaling=lambda w: if_built("results/tables/c3_by_depth.csv", rules.scaling_table.output.csv),
        lens=[f for c in CELLS if c.lens for f in lens_metrics(c.name)],
    output:
        csv=report("results/tables/c3_by_depth.csv", caption="../report/table.rst", category="Tables"),
        md="results/tables/c3_by_depth.md",
    log:
        "logs/tables/c3_by_depth.log",
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/c3_by_depth_table.py"


# C3 by state against width (scaling.c3_by_width): each lens cell's logit and certified lens, tuned-lens's optimiser
# at each lens_budget budget, the residual share and the models' margins (tying.claims.c3_by_width).
rule c3_by_width_table:
    input:
        unpack(width_table_inputs),
    output:
        csv=report(f"{WIDTH_TABLE}.csv", caption="../report/table.rst", category="Tables"),
        md=f"{WIDTH_TABLE}.md",
    params:
        cells=lambda w: width_cells(config),
        certified=lambda w: (config["lens"]["steps"],
                             config["lens"]["steps"] * config["lens"]["batch_size"] * config["lens"]["seq_len"]),
    log:
        "logs/tables/c3_by_width.log",
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/c3_by_width_table.py"


# C3 against the lens's budget and procedure, the tying comparison beside the null pairs (tying.claims.lens_budget).
rule c3_by_lens_table:
    input:
        lambda w: if_built(f"{BUDGET_TABLE}.md", [sweep_path(*run) for run in budget_runs(config)]),
    output:
        table=report(f"{BUDGET_TABLE}.parquet", caption="../report/table.rst", category="Tables"),
        by_state=f"{BUDGET_TABLE}_by_state.parquet",
        states=f"{BUDGET_TABLE}_states.parquet",
        md=f"{BUDGET_TABLE}.md",
    params:
        comparisons=lambda w: budget_comparisons(config),
        described=lambda w: budget_described(config),
        lens=config["lens"],
    log:
        "logs/tables/c3_by_lens.log",
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/c3_by_lens_table.py"

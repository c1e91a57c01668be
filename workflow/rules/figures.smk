# One rule per paper figure: tidy metric Parquet in, vector PDF out (tying.report.figures.registry draws each rule's
# figure); Figures 4 and 5 are Figure 1's rule on another metric.


rule fig1:
    input:
        lambda w: per_seed(rules.alignment, figure_pair("fig1")),
    output:
        report("figures/fig1.pdf", caption="../report/fig1.rst", category="Figures"),
    params:
        pair=lambda w: figure_pair("fig1"),
        models=lambda w: released_models(config, figure_pair("fig1")),  # the title's, in place of a step
    log:
        "logs/figures/fig1.log",
    group:
        "tables"
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/figure.py"


rule fig_evolution:
    input:
        lambda w: per_seed(rules.evolution, figure_pair(w.fig)),
    output:
        report("figures/{fig}.pdf", caption="../report/evolution.rst", category="Figures"),
    params:
        pair=lambda w: figure_pair(w.fig),
    log:
        "logs/figures/{fig}.log",
    wildcard_constraints:
        fig="fig3|fig8|fig9",
    group:
        "tables"
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/figure.py"


rule fig4:
    input:
        lambda w: per_seed(rules.grad_flow, figure_pair("fig4")),
    output:
        report("figures/fig4.pdf", caption="../report/fig4.rst", category="Figures"),
    params:
        pair=lambda w: figure_pair("fig4"),
    log:
        "logs/figures/fig4.log",
    group:
        "tables"
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/figure.py"


rule fig5:
    input:
        lambda w: per_seed(rules.norm_freq, figure_pair("fig5")),
    output:
        report("figures/fig5.pdf", caption="../report/fig5.rst", category="Figures"),
    params:
        pair=lambda w: figure_pair("fig5"),
        bins_per_decade=config["analysis"]["norm_bins_per_decade"],
    log:
        "logs/figures/fig5.log",
    group:
        "tables"
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/figure.py"


rule c3_by_depth_figure:
    input:
        lambda w: if_built("figures/c3_by_depth.pdf", rules.c3_by_depth_table.output.csv),
    output:
        report("figures/c3_by_depth.pdf", caption="../report/c3_by_depth.rst", category="Figures"),
    log:
        "logs/figures/c3_by_depth.log",
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/c3_by_depth_figure.py"


rule c3_by_width_figure:
    input:
        lambda w: if_built(WIDTH_FIGURE, rules.c3_by_width_table.output.csv),
    output:
        report(WIDTH_FIGURE, caption="../report/c3_by_width.rst", category="Figures"),
    log:
        "logs/figures/c3_by_width.log",
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/c3_by_width_figure.py"


# Every claim at a glance (tying.report.figures.claims_summary): claims_figure_tables in common.smk.
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


rule c3_by_lens_figure:
    input:
        table=lambda w: if_built(BUDGET_FIGURE, rules.c3_by_lens_table.output.table),
        by_state=lambda w: rules.c3_by_lens_table.output.by_state,
    output:
        report(BUDGET_FIGURE, caption="../report/c3_by_lens.rst", category="Figures"),
    log:
        "logs/figures/c3_by_lens.log",
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/c3_by_lens_figure.py"

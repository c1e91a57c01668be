# The paper's tables (CSV + Markdown) and figures (tidy metric Parquet in, vector PDF out;
# tying.report.figures.registry draws each figure rule's figure); Figures 4 and 5 are Figure 1's rule on another
# metric.
from tying.plan.pairs import released_models


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


rule fig_lens:
    input:
        lambda w: lens_metrics(figure_pair(w.fig)),
    output:
        report("figures/{fig}.pdf", caption="../report/lens.rst", category="Figures"),
    params:
        pair=lambda w: figure_pair(w.fig),
    log:
        "logs/figures/{fig}.log",
    wildcard_constraints:
        fig="fig2|fig6|fig7",
    group:
        "tables"
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/figure.py"

# C3 against depth (scaling.c3_by_depth): each lens cell's C3 from the scaling table beside its tuned-lens KL per
# state (tying.claims.c3_by_depth), as results/tables/c3_by_depth.{csv,md} and figures/c3_by_depth.pdf.


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

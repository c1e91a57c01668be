# C3 by state against width (scaling.c3_by_width; tying.plan.c3_by_width): each lens cell's logit and certified
# lens, tuned-lens's optimiser at each lens_budget budget, the residual share and the models' margins
# (tying.claims.c3_by_width), as results/tables/c3_by_width.{csv,md} and figures/c3_by_width.pdf.
from tying.plan import c3_by_width
from tying.plan.lens_budget import sweep_path


rule c3_by_width_table:
    input:
        unpack(width_table_inputs),
    output:
        csv=report(f"{c3_by_width.TABLE}.csv", caption="../report/table.rst", category="Tables"),
        md=f"{c3_by_width.TABLE}.md",
    params:
        cells=lambda w: c3_by_width.width_cells(config),
        certified=lambda w: (config["lens"]["steps"],
                             config["lens"]["steps"] * config["lens"]["batch_size"] * config["lens"]["seq_len"]),
    log:
        "logs/tables/c3_by_width.log",
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/c3_by_width_table.py"


rule c3_by_width_figure:
    input:
        lambda w: if_built(c3_by_width.FIGURE, rules.c3_by_width_table.output.csv),
    output:
        report(c3_by_width.FIGURE, caption="../report/c3_by_width.rst", category="Figures"),
    log:
        "logs/figures/c3_by_width.log",
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/c3_by_width_figure.py"

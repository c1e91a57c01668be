# C3 against the lens's budget (lens_budget; tying.plan.lens_budget): one sweep job a trained run, every procedure
# and budget on it, its state-0 floor beside them (tying.lens.lens_budget); then the tying comparison beside the null
# pairs (tying.claims.lens_budget), as results/tables/lens_budget.{parquet,md} and figures/lens_budget.pdf.
from tying.plan import lens_budget
from tying.plan.references import checkpoint_dir


rule lens_budget:
    input:
        model=lambda w: checkpoint_dir(w.arch, w.variant, w.seed, w.step),
        train=rules.tokens.output.train,
        val=rules.tokens.output.val,
        meta=rules.tokens.output.meta,
    output:
        lens_budget.sweep_path("{arch}", "{variant}", "{seed}", "{step}"),
    params:
        lens=config["lens"],
        procedures=config["lens_budget"]["procedures"],
        steps=config["lens_budget"]["steps"],
        # only when set: a sweep without it keeps its recorded params
        **({"batch_sizes": config["lens_budget"]["batch_sizes"]} if "batch_sizes" in config["lens_budget"] else {}),
    log:
        "logs/lens_budget/{arch}/{variant}/seed{seed}/step{step}.log",
    resources:
        **LENS_RESOURCES,
    threads: config["lens"]["threads"]
    wildcard_constraints:
        step=r"\d+",
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/lens_budget.py"


rule lens_budget_table:
    input:
        lambda w: if_built(f"{lens_budget.TABLE}.md",
                           [lens_budget.sweep_path(*run) for run in lens_budget.sweep_runs(config)]),
    output:
        table=report(f"{lens_budget.TABLE}.parquet", caption="../report/table.rst", category="Tables"),
        by_state=f"{lens_budget.TABLE}_by_state.parquet",
        states=f"{lens_budget.TABLE}_states.parquet",
        md=f"{lens_budget.TABLE}.md",
    params:
        comparisons=lambda w: lens_budget.comparisons(config),
        described=lambda w: lens_budget.described(config),
        lens=config["lens"],
    log:
        "logs/tables/lens_budget.log",
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/lens_budget_table.py"


rule lens_budget_figure:
    input:
        table=lambda w: if_built(lens_budget.FIGURE, rules.lens_budget_table.output.table),
        by_state=lambda w: rules.lens_budget_table.output.by_state,
    output:
        report(lens_budget.FIGURE, caption="../report/lens_budget.rst", category="Figures"),
    log:
        "logs/figures/lens_budget.log",
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/lens_budget_figure.py"

"""C3 by state against width (config `scaling.c3_by_width: true`): what the study reads, as pure functions of the
config.

Its cells are the scaling grid's lens cells, one a width (tying.plan.grid checks it), narrow to wide. Per cell,
state by state, it sets the tied run against the untied run of each seed (the cell's one tying comparison) under
three lenses, each from one source:

- the logit lens and the certified lens (the config's `lens:` recipe, checked along its training and, where
  scaling.lens_reference lists the cell, against its 4x reference lens): the lens job's metric of each run
  (results/metrics/lens/<cell>/<role>/seed<seed>.parquet), the one the scaling table's C3 comes from;
- tuned-lens's optimiser at each of lens_budget.steps: the lens_budget sweep of each run at its final step
  (tying.plan.lens_budget.sweep_path), its `tuned_lens` rows (lens_budget.procedures must list it; the
  sweep's other procedures are not read: the certified one at lens.steps would repeat the lens job);
- beside them, each run's residual share (tying.lens.residual_share) and each model's margin over its bigram
  table (the quality metric the claims' LM row reads).

The sweeps need no lens_budget.comparisons: the study names its runs itself (`width_runs`), so the grid is the
one list of them; a config may still give comparisons for figures/lens_budget.pdf beside it.
"""

from tying.errors import PipelineError
from tying.plan.grid import cells

TABLE = "results/tables/c3_by_width"
FIGURE = "figures/c3_by_width.pdf"
PROCEDURE = "tuned_lens"  # the sweeps' procedure the study reads


def built(config):
    """True when the config builds C3 against width."""
    return bool((config.get("scaling") or {}).get("c3_by_width"))


def width_cells(config):
    """The study's cells, narrow to wide, each as {cell, hidden_size, layers, steps, tied, untied} (the last two:
    the cell's tied and untied variant names)."""
    lens_cells = sorted((c for c in cells(config) if c.lens), key=lambda c: c.hidden_size)
    return [
        {
            "cell": c.name,
            "hidden_size": c.hidden_size,
            "layers": c.layers,
            "steps": c.steps,
            "tied": c.tied,
            "untied": c.untied,
        }
        for c in lens_cells
    ]


def width_runs(config):
    """(arch, variant, seed, step) of every run the study sweeps: each cell's tied and untied run of every seed at
    its final step."""
    seeds = config["scaling"]["seeds"]
    return [
        (c["cell"], c[role], seed, c["steps"])
        for c in width_cells(config)
        for role in ("tied", "untied")
        for seed in seeds
    ]


def check(config):
    """The sweeps the study reads run its procedure."""
    if built(config) and PROCEDURE not in config["lens_budget"]["procedures"]:
        raise PipelineError(
            f"scaling.c3_by_width: reads the lens_budget sweeps' {PROCEDURE} rows, and "
            f"lens_budget.procedures {config['lens_budget']['procedures']} lacks {PROCEDURE}"
        )

"""The figure of each figure rule: rule name -> a function of (frame, out, pair, **the rule's other params).

workflow/scripts/figure.py calls `draw(rule, ...)`; a rule with no entry stops with one line
instead of writing nothing.
"""

from tying.errors import PipelineError
from tying.report.figures.alignment_hist import plot_alignment_hist
from tying.report.figures.evolution import plot_evolution
from tying.report.figures.grad_flow import plot_grad_flow
from tying.report.figures.kl_by_layer import plot_kl_by_layer
from tying.report.figures.norm_frequency import plot_norm_frequency

FIGURES = {
    "fig1": lambda frame, out, pair, models: plot_alignment_hist(frame, out, pair=pair, models=models),
    "fig_evolution": lambda frame, out, pair: plot_evolution(frame, out, run=pair),
    "fig4": lambda frame, out, pair: plot_grad_flow(frame, out, pair=pair, variant=frame["variant"].iloc[0]),
    "fig5": lambda frame, out, pair, bins_per_decade: plot_norm_frequency(
        frame, out, pair=pair, bins_per_decade=bins_per_decade
    ),
    "fig_lens": lambda frame, out, pair: plot_kl_by_layer(frame, out, title=pair),
}


def draw(rule, frame, out, **params):
    """Write the PDF `out` of figure rule `rule` from its metric `frame` and params."""
    if rule not in FIGURES:
        raise PipelineError(
            f"no figure is registered for rule {rule!r} (tying.report.figures.registry: {', '.join(FIGURES)})"
        )
    FIGURES[rule](frame, out, **params)

from tying.figures.alignment_hist import plot_alignment_hist
from tying.figures.evolution import plot_evolution
from tying.figures.grad_flow import plot_grad_flow
from tying.figures.kl_by_layer import plot_kl_by_layer
from tying.figures.norm_frequency import plot_norm_frequency
from tying.script import run
from tying.tidy import read_frames


def main(snakemake):
    frame, out, pair = read_frames(snakemake.input), snakemake.output[0], snakemake.params.pair
    if snakemake.rule == "fig1":
        plot_alignment_hist(frame, out, pair=pair)
    elif snakemake.rule == "fig_evolution":
        plot_evolution(frame, out, run=pair)
    elif snakemake.rule == "fig4":
        plot_grad_flow(frame, out, pair=pair, variant=frame["variant"].iloc[0])
    elif snakemake.rule == "fig5":
        plot_norm_frequency(frame, out, pair=pair, bins_per_decade=snakemake.params.bins_per_decade)
    elif snakemake.rule == "fig_lens":
        plot_kl_by_layer(frame, out, title=pair)


run(snakemake, main)

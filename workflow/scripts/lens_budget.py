from tying.io import write_parquet
from tying.lens.jobs import load_job
from tying.lens.lens_budget import sweep_lenses
from tying.rule_script import run
from tying.runtime import configure


def main(snakemake):
    w = snakemake.wildcards
    configure(snakemake.threads)
    model, train, val = load_job(snakemake.input, snakemake.params.lens)
    p = snakemake.params
    frame = sweep_lenses(
        model, train, val, p.lens, p.procedures, p.steps, seed=int(w.seed), batch_sizes=p.get("batch_sizes")
    )
    write_parquet(frame.assign(arch=w.arch, variant=w.variant, seed=int(w.seed), step=int(w.step)), snakemake.output[0])


run(snakemake, main)

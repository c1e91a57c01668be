from tying.io import write_parquet
from tying.lens import fit_and_evaluate, load_job, save_lens
from tying.runtime import configure
from tying.rule_script import run
from tying.tidy import with_ids


def main(snakemake):
    out, cfg = snakemake.output, snakemake.params.lens
    configure(snakemake.threads)
    model, train, val = load_job(snakemake.input, cfg)
    lens, frame = fit_and_evaluate(model, train, val, cfg, seed=snakemake.params.ids["seed"])
    save_lens(lens, out.weights)
    write_parquet(with_ids(frame, snakemake.params.ids), out.metric)


run(snakemake, main)

from tying.io import write_parquet
from tying.lens.jobs import lens_job, load_job
from tying.lens.translators import save_lens
from tying.runtime import configure
from tying.rule_script import run
from tying.tidy import with_ids


def main(snakemake):
    out, cfg, ids = snakemake.output, snakemake.params.lens, snakemake.params.ids
    configure(snakemake.threads)
    model, train, val = load_job(snakemake.input, cfg)
    lens, frame, windows = lens_job(model, train, val, cfg, seed=ids["seed"])
    save_lens(lens, out.weights)
    write_parquet(with_ids(frame, ids), out.metric)
    write_parquet(with_ids(windows, ids), out.windows)


run(snakemake, main)

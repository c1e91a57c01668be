from tying.io import write_parquet
from tying.lens.jobs import lens_job, load_job, with_floors
from tying.lens.translators import save_lens
from tying.lens.tuned_lens_format import base_model, given_lens_job, load_tuned_lens, save_tuned_lens
from tying.lens.unembed import final_norm
from tying.rule_script import run
from tying.runtime import configure
from tying.tidy import with_ids


def main(snakemake):
    out, cfg, ids = snakemake.output, snakemake.params.lens, snakemake.params.ids
    configure(snakemake.threads)
    model, train, val = load_job(snakemake.input, cfg)
    final_norm(model)  # a family whose readout cannot be read ends here, before any work
    if snakemake.input.given:
        lens = load_tuned_lens(snakemake.input.given, model)
        frame, windows = given_lens_job(model, lens, val, cfg)
    else:
        lens, frame, windows = lens_job(model, train, val, cfg, seed=ids["seed"])
    save_lens(lens, out.weights)
    name, revision = base_model(snakemake.params.ref, snakemake.input.model)
    save_tuned_lens(lens, model, out.tuned_lens, base_model=name, revision=revision)
    write_parquet(with_ids(with_floors(frame, model, val, cfg), ids), out.metric)
    write_parquet(with_ids(windows, ids), out.windows)


run(snakemake, main)

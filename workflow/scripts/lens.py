from tying.io import write_parquet
from tying.lens import evaluate_lens, save_lens, train_lens
from tying.runtime import configure
from tying.script import run
from tying.tidy import with_ids
from tying.tokens import load_ids
from tying.unembed import frozen_model, lens_placement


def main(snakemake):
    inp, out, cfg = snakemake.input, snakemake.output, snakemake.params.lens
    configure(snakemake.threads)
    device, dtype = lens_placement(cfg["device"], cfg["dtype"])
    model = frozen_model(inp.model, device=device, dtype=dtype)
    lens = train_lens(model, load_ids(inp.train, inp.meta), seq_len=cfg["seq_len"], steps=cfg["steps"],
                      batch_size=cfg["batch_size"], lr=cfg["lr"], seed=snakemake.params.ids["seed"])
    frame = evaluate_lens(model, lens, load_ids(inp.val, inp.meta), seq_len=cfg["seq_len"],
                          batch_size=cfg["batch_size"], batches=cfg["eval_batches"])
    save_lens(lens, out.weights)
    write_parquet(with_ids(frame, snakemake.params.ids), out.metric)


run(snakemake, main)

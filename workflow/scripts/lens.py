import sys

from tying.io import write_parquet
from tying.lens import convergence, evaluate_lens, recipe, save_lens, train_lens
from tying.runtime import configure
from tying.script import run
from tying.tidy import with_ids
from tying.tokens import load_ids
from tying.unembed import frozen_model, lens_placement


def main(snakemake):
    """Train the lens at lens.steps and, as its convergence check, a second one at half the steps
    (same seed, so the same first windows); both are evaluated on the same held-out windows."""
    inp, out, cfg = snakemake.input, snakemake.output, snakemake.params.lens
    configure(snakemake.threads)
    device, dtype = lens_placement(cfg["device"], cfg["dtype"])
    model = frozen_model(inp.model, device=device, dtype=dtype)
    train, val, seed = load_ids(inp.train, inp.meta), load_ids(inp.val, inp.meta), snakemake.params.ids["seed"]
    frames = {}
    for steps in (cfg["steps"] // 2, cfg["steps"]):
        lens = train_lens(model, train, **{**recipe(cfg), "steps": steps}, seed=seed)
        frames[steps] = evaluate_lens(model, lens, val, seq_len=cfg["seq_len"], batch_size=cfg["batch_size"],
                                      batches=cfg["eval_batches"])
    check = convergence(frames[cfg["steps"] // 2], frames[cfg["steps"]])
    print(f"lens convergence, {cfg['steps'] // 2} -> {cfg['steps']} steps: max |change| "
          f"{check['change_bits'].abs().max():.4f} bits", file=sys.stderr)
    save_lens(lens, out.weights)
    write_parquet(with_ids(frames[cfg["steps"]], snakemake.params.ids), out.metric)
    write_parquet(with_ids(check.assign(steps=cfg["steps"]), snakemake.params.ids), out.convergence)


run(snakemake, main)

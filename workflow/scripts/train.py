import json

from transformers import AutoTokenizer

from tying.distributed import launch
from tying.models import resolve_device
from tying.runtime import configure
from tying.script import run
from tying.tokens import load_ids
from tying.train import RunSpec, train


def main(snakemake):
    inp, out, params, w = snakemake.input, snakemake.output, snakemake.params, snakemake.wildcards
    configure(snakemake.threads)
    meta = json.loads(open(inp.meta).read())
    run_params = {**params.run, "checkpoints": tuple(params.run["checkpoints"])}
    spec = RunSpec(**run_params, seed=int(w.seed), vocab_size=meta["vocab_size"], eos_id=meta["eos_id"])
    device = resolve_device(params.device)
    outputs = dict(checkpoint_dirs=dict(zip(spec.checkpoints, out.checkpoints)), log_path=out.log,
                   provenance_path=out.provenance, device=device, name=f"{w.arch}/{w.variant}/seed{w.seed}",
                   log_every=params.log_every)
    if params.nproc > 1:
        launch(params.nproc, spec, train=inp.train, val=inp.val, meta=inp.meta, tokenizer=inp.tokenizer,
               work_dir=params.work_dir, threads=snakemake.threads, **outputs)
        return
    train(spec, load_ids(inp.train, inp.meta), load_ids(inp.val, inp.meta),
          AutoTokenizer.from_pretrained(inp.tokenizer), params.work_dir, **outputs)


run(snakemake, main)

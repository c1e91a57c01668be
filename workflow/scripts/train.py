import json

from tying.plan.run_spec import RunSpec
from tying.rule_script import run
from tying.runtime import configure, resolve_device
from tying.train.distributed import launch
from tying.train.loop import train_from_files


def main(snakemake):
    inp, out, params, w = snakemake.input, snakemake.output, snakemake.params, snakemake.wildcards
    configure(snakemake.threads)
    meta = json.loads(open(inp.meta).read())
    spec = RunSpec.from_dict(
        {**params.run, "seed": int(w.seed), "vocab_size": meta["vocab_size"], "eos_id": meta["eos_id"]}
    )
    files = {"train": inp.train, "val": inp.val, "meta": inp.meta, "tokenizer": inp.tokenizer}
    device = resolve_device(params.device)
    outputs = dict(
        checkpoint_dirs=dict(zip(spec.checkpoints, out.checkpoints)),
        log_path=out.log,
        provenance_path=out.provenance,
        device=device,
        name=f"{w.arch}/{w.variant}/seed{w.seed}",
        log_every=params.log_every,
    )
    if params.nproc > 1:
        launch(params.nproc, spec, files, params.work_dir, threads=snakemake.threads, **outputs)
    else:
        train_from_files(spec, files, params.work_dir, **outputs)


run(snakemake, main)

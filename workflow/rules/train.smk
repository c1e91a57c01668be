# One train rule per list of exported steps (tying.plan.runs.checkpoint_groups): a rule's outputs are fixed
# lists, so the architectures whose own schedule exports other steps (scaling cells) get the same rule
# again, `train_<steps>`, constrained to them; `train` itself is every other architecture's.
from tying.plan.references import checkpoint_dir
from tying.plan.run_params import run_params
from tying.plan.runs import checkpoint_groups

TRAIN_GROUPS = checkpoint_groups(config)  # {exported steps: architectures}; tying.plan.runs.schedule
OWN_CHECKPOINTS = [a for c, group in TRAIN_GROUPS.items() if c != schedule(config).checkpoints for a in group]
NOT_OWN = f"(?!(?:{'|'.join(OWN_CHECKPOINTS)})(?:/|$))[A-Za-z0-9_]+"  # `train`'s arch: none of those

for checkpoints, archs in TRAIN_GROUPS.items():
    shared = checkpoints == schedule(config).checkpoints

    rule:
        name:
            "train" if shared else "train_" + "_".join(map(str, checkpoints))
        input:
            train=rules.tokens.output.train,
            val=rules.tokens.output.val,
            meta=rules.tokens.output.meta,
            tokenizer=rules.tokenizer.output.tokenizer,
        output:
            checkpoints=[
                directory(checkpoint_dir("{arch}", "{variant}", "{seed}", step))
                for step in checkpoints
            ],
            log="results/train/{arch}/{variant}/seed{seed}/log.parquet",
            provenance="results/train/{arch}/{variant}/seed{seed}/provenance.parquet",
        params:
            run=lambda w: run_params(config, w.arch, w.variant),
            work_dir=lambda w: f"results/train/{w.arch}/{w.variant}/seed{w.seed}/work",
            log_every=config["train"]["log_every"],
            device=config["train"]["device"],
            nproc=config["train"]["nproc"],
        log:
            "logs/train/{arch}/{variant}/seed{seed}.log",
        resources:
            mem_mb=4000,
            runtime=120,
            gpu=config["train"]["nproc"] if config["train"]["device"] == "cuda" else 0,
        threads: config["train"]["threads"]
        wildcard_constraints:
            **({"arch": "|".join(archs)} if not shared else {"arch": NOT_OWN} if OWN_CHECKPOINTS else {}),
        conda:
            "../envs/tying.yaml"
        script:
            "../scripts/train.py"

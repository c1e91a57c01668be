from tying.io import write_parquet
from tying.metrics.zero_shot import lm_eval_scores
from tying.rule_script import run
from tying.runtime import configure
from tying.tidy import with_ids


def main(snakemake):
    params, cfg = snakemake.params, snakemake.params.lm_eval
    configure(snakemake.threads)
    frame = lm_eval_scores(
        snakemake.input.model,
        cfg["tasks"],
        num_fewshot=cfg["num_fewshot"],
        batch_size=cfg["batch_size"],
        limit=cfg["limit"],
        include_path=cfg["include_path"],
        device=params.device,
        dtype=params.dtype,
    )
    write_parquet(with_ids(frame, params.ids), snakemake.output[0])


run(snakemake, main)

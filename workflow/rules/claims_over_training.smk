# Claims over training (docs/statistics.md, "Claims over training"): the claims table's statistics at every
# checkpoint a pair's models share. A trained pair: every train.checkpoints step of its tied, untied and
# scaled runs, per seed. A released pair: the matched hub branches of its `trajectory` (written by
# `python -m tying.hub.revisions match`), fetched as embeddings only by hub_embeddings.
from tying.plan.claims_over_training import trajectory_models, trajectory_points, trajectory_variants


rule trajectory:
    input:
        unpack(lambda w: trajectory_inputs(w.pair, int(w.seed))),
    output:
        "results/metrics/trajectory/{pair}/seed{seed}.parquet",
    params:
        ids=lambda w: {"pair": w.pair, "seed": int(w.seed)},
        points=lambda w: trajectory_points(config, w.pair),
        variants=lambda w: trajectory_variants(config, w.pair),
        analysis=lambda w: analysis_params(config, w.pair, "rows", "held_out", "split_seed"),
        knn_k=config["analysis"]["knn_k"],
        approximate=config["analysis"]["knn_approximate"],
        min_count=config["analysis"]["min_count"],
        edges=config["analysis"]["exposure_edges"],
    log:
        "logs/metrics/trajectory/{pair}/seed{seed}.log",
    resources:
        # one point's untied, tied and scaled models at a time
        mem_mb=lambda w, input: request_mb("trajectory", [*input.untied, *input.tied, *input.get("scaled", [])],
                                           8000, held=2 + len(trajectory_variants(config, w.pair))),
        runtime=60,
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/trajectory.py"


rule claims_over_training:
    input:
        trajectory=lambda w: per_seed(rules.trajectory, claims_over_training_pairs()),
        quality=lambda w: per_seed(rules.quality, [p for p in claims_over_training_pairs() if trained(config, p)]),
    output:
        csv=report("results/tables/claims_over_training.csv", caption="../report/table.rst", category="Tables"),
        md="results/tables/claims_over_training.md",
        figure=report("figures/claims_over_training.pdf", caption="../report/claims_over_training.rst",
                      category="Figures"),
    params:
        released=lambda w: released_pairs(config, claims_over_training_pairs()),
    log:
        "logs/tables/claims_over_training.log",
    group:
        "tables"
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/claims_over_training.py"

# Claims over training (README, "Claims over training"): the claims table's statistics at every
# checkpoint a pair's models share. A trained pair: every train.checkpoints step of its tied, untied and
# scaled runs, per seed. A released pair: the matched hub branches of its `trajectory` (written by
# `python -m tying.revisions match`), fetched as embeddings only by hub_embeddings.

_unwritten = [p for p in config.get("tables", {}).get("claims_over_training", [])
              if p in PAIRS and not is_trained(PAIRS[p]["untied"]) and not PAIRS[p].get("trajectory")]
if _unwritten:
    sys.exit(f"config error: pairs.{_unwritten[0]}.trajectory is empty: write it with "
             f"python -m tying.revisions match (README, Claims over training)")


def trajectory_points(pair):
    """The pair's points in order: {step, tokens} of each checkpoint (trained) or, for a released pair,
    {tokens, tied, untied, tied_tokens, untied_tokens} (tokens seen; revisions) of each trajectory entry."""
    p = PAIRS[pair]
    if is_trained(p["untied"]):
        train, seq_len = config["train"], model_dims(config, p["untied"]["arch"])["seq_len"]
        return [{"step": s, "tokens": s * train["batch_size"] * seq_len} for s in CHECKPOINT_STEPS]
    return [{"tokens": point["tokens_b"] * 1e9, "tied": point["tied"], "untied": point["untied"],
             "tied_tokens": point["tied_tokens_b"] * 1e9, "untied_tokens": point["untied_tokens_b"] * 1e9}
            for point in p["trajectory"]]


def trajectory_variants(pair):
    """The tied variant and analysis.scaled_variant when the pair trains it (claims C7a, C7b), else []."""
    p, scaled = PAIRS[pair], config["analysis"]["scaled_variant"]
    return [p["tied"]["variant"], scaled] if is_trained(p["untied"]) and scaled in p.get("scaled", []) else []


def trajectory_inputs(pair, seed):
    """Model directories by role, one per point (scaled: one per point and variant); a trained pair's
    analysed-token set (the final-step metrics' own) and evolution metric (C4)."""
    p = PAIRS[pair]
    if not is_trained(p["untied"]):
        points = trajectory_points(pair)
        return {role: [hub_dir(p[role]["hub"], point[role]) for point in points] for role in ("tied", "untied")}
    models = [pair_models(pair, seed, s) for s in CHECKPOINT_STEPS]
    scaled = [model_dir({**p["tied"], "variant": v}, seed, s) for s in CHECKPOINT_STEPS
              for v in trajectory_variants(pair)]
    inputs = {role: [m[role] for m in models] for role in ("tied", "untied")} | token_set(pair, seed)
    return inputs | {"scaled": scaled, "evolution": expand(rules.evolution.output[0], pair=pair, seed=seed)[0]}


def claims_over_training_pairs():
    """The pairs tables.claims_over_training names."""
    return config.get("tables", {}).get("claims_over_training", [])


rule trajectory:
    input:
        unpack(lambda w: trajectory_inputs(w.pair, int(w.seed))),
    output:
        "results/metrics/trajectory/{pair}/seed{seed}.parquet",
    params:
        ids=lambda w: {"pair": w.pair, "seed": int(w.seed)},
        points=lambda w: trajectory_points(w.pair),
        variants=lambda w: trajectory_variants(w.pair),
        analysis=lambda w: analysis_params(w.pair, "rows", "held_out", "split_seed"),
        k=config["analysis"]["knn_k"],
        approximate=config["analysis"]["knn_approximate"],
    log:
        "logs/metrics/trajectory/{pair}/seed{seed}.log",
    benchmark:
        "results/benchmarks/metrics/trajectory/{pair}/seed{seed}.tsv"
    resources:
        mem_mb=8000,
        runtime=60,
    threads: 1
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/trajectory.py"


rule claims_over_training:
    input:
        lambda w: [f for p in claims_over_training_pairs() for f in per_seed(rules.trajectory.output[0], p)],
    output:
        csv=report("results/tables/claims_over_training.csv", caption="../report/table.rst", category="Tables"),
        md="results/tables/claims_over_training.md",
        figure=report("figures/claims_over_training.pdf", caption="../report/claims_over_training.rst",
                      category="Figures"),
    params:
        released=lambda w: released_pairs(claims_over_training_pairs()),
    log:
        "logs/tables/claims_over_training.log",
    benchmark:
        "results/benchmarks/tables/claims_over_training.tsv"
    resources:
        mem_mb=2000,
        runtime=10,
    threads: 1
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/claims_over_training.py"

# The rules' input, param and target functions, grouped by the file of rules that uses them and kept out of
# those files, which hold rules only (`snakemake --lint`). Included after common.smk, before any rule file.


# --- data.smk ------------------------------------------------------------------------------------------------
def corpus_shards():
    """Every corpus shard's documents file, in shard order."""
    return expand(rules.corpus.output.documents, shard=CORPUS_SHARDS)


# --- metrics.smk ---------------------------------------------------------------------------------------------
def metric_models(w):
    """A per-pair metric job's models by role, a local model's tokenizer folder where it names one
    ({role}_tokenizer) and, for a trained pair, its token set."""
    return pair_models(config, w.pair, int(w.seed)) | local_tokenizers(config, w.pair) | token_set(w.pair, w.seed)


def metric_ids(w):
    """A per-pair metric's identification columns at the pair's compared step."""
    return {"pair": w.pair, "seed": int(w.seed), "step": pair_step(config, w.pair)}


def baseline_file(shape):
    """The count-baselines file of a run shape (seed, steps, batch_size, seq_len): tying.plan.runs.run_shape."""
    return expand(rules.baseline.output[0], **dict(zip(("seed", "steps", "batch", "seq_len"), shape)))[0]


def quality_inputs(w):
    """A quality job's training logs and count baselines, one each per model of the pair
    (tying.plan.pairs.quality_runs)."""
    runs, step = quality_runs(config, w.pair), pair_step(config, w.pair)
    return {"logs": [expand(rules.train.output.log, arch=a, variant=v, seed=w.seed)[0] for _, a, v in runs],
            "baselines": [baseline_file(run_shape(config, a, w.seed, step)) for _, a, _ in runs]}


# --- lens.smk ------------------------------------------------------------------------------------------------
def lens_inputs(pair, role, seed):
    """A lens job's inputs: the full model and token arrays in its tokenizer's ids."""
    return {"model": pair_models(config, pair, seed, full=True)[role], **lens_tokens(pair, role)}


def null_lens_inputs(pair, seed):
    """The matched null's lens job's inputs: its run's checkpoint at the pair's step and the pipeline's tokens."""
    return {"model": reference(matched_null(config, pair)).directory(seed, pair_step(config, pair)),
            **{k: rules.tokens.output[k] for k in ("train", "val", "meta")}}


def given_lens(pair, role):
    """The tuned-lens folder a pair names for a role (`lens: {tied: DIR, untied: DIR}`), scored in place of
    training one; [] when it names none."""
    lens = PAIRS[pair].get("lens")
    return lens[role] if isinstance(lens, dict) and role in lens else []


def lens_tokens(pair, role):
    """Train/validation token arrays for a pair's model: the pipeline's tokens for a trained run,
    the corpus in the model's own tokenizer for a hub or local model."""
    ref, keys = reference(PAIRS[pair][role]), ("train", "val", "meta")
    if ref.trained:
        return {k: rules.tokens.output[k] for k in keys}
    own = rules.local_tokens if ref.local else rules.hub_tokens
    return {k: expand(own.output[k], **ref.tokens_source())[0] for k in keys}


def lens_metrics(pair, output=None):
    """Per-seed lens metric files (or another of the lens rule's outputs) of both models of a pair."""
    return expand(output or rules.lens.output.metric, pair=pair, role=("tied", "untied"), seed=pair_seeds(config, pair))


def local_quality_inputs(pair):
    """A local pair's quality job's inputs: each role's whole model ({role}_model) and its token arrays in its own
    tokenizer ({role}_train, {role}_val, {role}_meta), as its lens reads them."""
    models = pair_models(config, pair, 0, full=True)
    return {f"{role}_{key}": path for role in ("tied", "untied")
            for key, path in {"model": models[role], **lens_tokens(pair, role)}.items()}


# --- claims.smk ----------------------------------------------------------------------------------------------
def pair_claims_inputs(pair, metrics):
    """Per-seed metric files of one pair's claims, by claim_statistics argument name, with (the pair's
    `lens` flag) the lens metrics of both models and their per-window KL (C3's interval and certificate),
    (its `lens_reference` flag) the first seed's reference lens checks, and its matched null run's lens metrics
    (tying.plan.claims.matched_null). A local pair's quality is local_quality's."""
    own = {"quality": rules.local_quality} if local_pair(config, pair) else {}
    inputs = {name: per_seed(own.get(name) or getattr(rules, name), pair) for name in metrics}
    if claims_lens(config, pair):
        inputs |= {"lens": lens_metrics(pair), "lens_windows": lens_metrics(pair, rules.lens.output.windows)}
    if claims_lens_reference(config, pair):
        inputs["lens_convergence"] = expand(rules.lens_convergence.output[0], pair=pair, role=("tied", "untied"),
                                            seed=pair_seeds(config, pair)[0])
    if claims_lens(config, pair) and matched_null(config, pair):
        inputs["lens_null"] = expand(rules.lens_null.output.metric, pair=pair, seed=matched_null_seeds(config, pair))
    return inputs


def claims_params(pairs_of, **fixed):
    """The claims rule's params for the pairs `pairs_of(wildcards)` names (the claims table's, or one scaling
    cell's); `fixed` replaces any of them."""
    return {
        "pairs": pairs_of,
        "released": lambda w: released_pairs(config, pairs_of(w)),
        "knn_k": config["analysis"]["knn_k"],
        "early_steps": lambda w: early_steps(config, pairs_of(w)[0]),
        "scaled_variant": config["analysis"]["scaled_variant"],
        "at_paper_scale": lambda w: claims_at_paper_scale(config),
        "token_sets": lambda w: exposure_token_sets(pairs_of(w)),
        "comparable_draws": config["analysis"]["comparable_draws"],
        "mixture": lambda w: mixture_pair(config, pairs_of(w)),
        "norm_shuffles": config["analysis"]["norm_shuffles"],
    } | fixed


def exposure_params(pairs_of):
    """The claims-by-exposure rule's params for the pairs `pairs_of(wildcards)` names."""
    return {
        "pairs": pairs_of,
        "token_sets": lambda w: exposure_token_sets(pairs_of(w)),
        "knn_k": config["analysis"]["knn_k"],
        "scaled_variant": config["analysis"]["scaled_variant"],
        "edges": config["analysis"]["exposure_edges"],
        "min_tokens": config["analysis"]["min_stratum_tokens"],
    }


def exposure_token_sets(pairs):
    """(pair, seed) of each trained pair's token sets among `pairs`, in exposure_inputs' order."""
    return [(p, s) for p in pairs if has_token_set(config, p) for s in pair_seeds(config, p)]


def exposure_inputs(pairs, metrics=True):
    """Per-token inputs of the claims by exposure of `pairs` (the first: C1, C2, C4, C7a, C7b; the others C1 and
    C2): the trained pairs' token sets and the first pair's per-token drifts and Procrustes cosines; `metrics`:
    the alignment and KNN metrics of every pair too."""
    first = pairs[0]
    inputs = {"token_sets": [token_set(p, s)["tokens"] for p, s in exposure_token_sets(pairs)]}
    if metrics:
        inputs |= {"alignment": per_seed(rules.alignment, pairs), "knn": per_seed(rules.knn, pairs)}
    if not has_token_set(config, first):
        return inputs
    own = pair_claims_metrics(config, first)
    for name, metric in (("evolution", rules.evolution), ("scaling", rules.scaling)):
        if name in own:
            inputs[f"{name}_tokens"] = expand(metric.output.tokens, pair=first, seed=pair_seeds(config, first))
    return inputs


def claims_exposure_inputs(pairs):
    """A claims job's per-token inputs (its comparable-token rows): exposure_inputs of `pairs` without the
    metrics the job reads anyway, those with files only."""
    return {name: files for name, files in exposure_inputs(pairs, metrics=False).items() if files}


def claims_inputs(wildcards):
    """The claims job's inputs, grouped (tying.plan.claims.flat_inputs): the first pair's per-seed metric files by
    claim_statistics argument name (tying.plan.claims.claims_metrics), the alignment, KNN and quality metrics of
    the others, the per-token inputs, and a released pair's fetch records naming the commits measured."""
    pair = if_built("results/tables/claims.parquet", claims_pairs(config))[0]
    metrics, further_metrics = claims_metrics(config)
    further = {name: per_seed(getattr(rules, name), pairs) for name, pairs in further_metrics.items() if pairs}
    inputs = {"first": pair_claims_inputs(pair, metrics), "further": further,
              "exposure": claims_exposure_inputs(claims_pairs(config))}
    if claims_sources(config):
        inputs["sources"] = claims_sources(config)
    paper_scale = config["analysis"].get("paper_scale_claims")
    return flat_inputs(inputs | ({"paper_scale": paper_scale} if paper_scale else {}))


def claims_figure_tables():
    """{row label: claims table} of figures/claims.pdf: this build's, then analysis.claims_beside's."""
    beside = config["analysis"]["claims_beside"]
    own = {"this build": if_built("figures/claims.pdf", rules.claims.output.parquet)}
    return own | ({beside["label"]: beside["path"]} if beside else {})


# --- downstream.smk ------------------------------------------------------------------------------------------
def downstream_metrics():
    """Per-run downstream metric files of Table 7's runs, for each configured part."""
    parts = [rule for name, rule in (("perplexity", rules.perplexity), ("lm_eval", rules.lm_eval))
             if name in DOWNSTREAM]
    return [expand(r.output[0], arch=a, variant=v, seed=s)[0] for r in parts for a, v, s in downstream_runs(config)]


def downstream_ids(w):
    """A downstream metric's identification columns: the run and its final step."""
    return {"arch": w.arch, "variant": w.variant, "seed": int(w.seed),
            "step": schedule(config, w.arch).final}


# --- claims_over_training.smk --------------------------------------------------------------------------------
def trajectory_inputs(pair, seed):
    """Model directories by role, one per point (scaled: one per point and variant); a trained pair's
    analysed tokens' draws at every checkpoint (each point keeps the tokens seen by then), their per-token
    drifts (C4) and its models' quality (LM)."""
    inputs = trajectory_models(config, pair, seed)
    if not trained(config, pair):
        return inputs
    return inputs | {"by_step": expand(rules.token_set.output.by_step, pair=pair, seed=seed)[0],
                     "evolution": expand(rules.evolution.output.tokens, pair=pair, seed=seed)[0],
                     "quality": expand(rules.quality.output[0], pair=pair, seed=seed)[0]}


def claims_over_training_pairs():
    """The pairs tables.claims_over_training names (if_built: a config without it ends the run)."""
    return table_pairs("claims_over_training")


# --- scaling.smk ---------------------------------------------------------------------------------------------
def cell_claims_inputs(wildcards):
    """A scaling cell's claims inputs: its pair's every metric and per-token inputs; the lens only in the cells
    scaling.lens names."""
    return flat_inputs({"first": pair_claims_inputs(wildcards.cell, pair_claims_metrics(config, wildcards.cell)),
                        "exposure": claims_exposure_inputs([wildcards.cell])})


# --- c3_by_width.smk -----------------------------------------------------------------------------------------
def width_table_inputs(wildcards):
    """The C3-by-width table's inputs (if_built: a config without scaling.c3_by_width ends the run): the lens
    cells' lens metrics, their runs' lens_budget sweeps, residual shares and quality metrics."""
    cells = [c["cell"] for c in if_built(f"{c3_by_width.TABLE}.csv", c3_by_width.width_cells(config))]
    return {"lens": [f for c in cells for f in lens_metrics(c)],
            "sweeps": [sweep_path(*run) for run in c3_by_width.width_runs(config)],
            "share": [f for c in cells for f in lens_metrics(c, rules.residual_share.output[0])],
            "quality": per_seed(rules.quality, cells)}


# --- c7_dose.smk ---------------------------------------------------------------------------------------------
def dose_runs(pair):
    """(variant, seed) of each dose's run of `pair`: its tied variant and its scaled variants, every seed."""
    return [(v, s) for v in scaled_variants(config, pair) for s in pair_seeds(config, pair)]


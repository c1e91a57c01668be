# The claims table with verdicts (tables.claims) and every claim at a glance (figures/claims.pdf).
from tying.plan.claims import (claims_at_paper_scale, claims_lens, claims_lens_reference, claims_metrics, claims_pairs,
                               claims_sources, flat_inputs, matched_null, matched_null_seeds, mixture_pair,
                               pair_claims_metrics)
from tying.plan.pairs import early_steps, local_pair


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


rule claims:
    input:
        unpack(claims_inputs),
    output:
        parquet="results/tables/claims.parquet",
        md=report("results/tables/claims.md", caption="../report/claims.rst", category="Tables"),
        seeds="results/tables/claims_seeds.parquet",
    params:
        **claims_params(lambda w: claims_pairs(config)),
    log:
        "logs/tables/claims.log",
    resources:
        mem_mb=4000,
        runtime=10,
    group:
        "tables"
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/claims.py"


# Every claim at a glance (tying.report.figures.claims_summary): claims_figure_tables above.
rule claims_figure:
    input:
        lambda w: list(claims_figure_tables().values()),
    output:
        report("figures/claims.pdf", caption="../report/claims_figure.rst", category="Figures"),
    params:
        labels=lambda w: list(claims_figure_tables()),
    log:
        "logs/figures/claims.log",
    group:
        "tables"
    conda:
        "../envs/tying.yaml"
    script:
        "../scripts/claims_figure.py"

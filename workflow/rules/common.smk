# Config validation and the helpers every rule uses.
import sys

from huggingface_hub import get_token
from snakemake.utils import min_version

from tying.config import check, claims_pairs, model_dims, run_params, typed_overrides
from tying.errors import PipelineError
from tying.revisions import PIN_COMMAND, unpinned_references

min_version("9.0")

typed_overrides(config, workflow.config_settings.config)  # --config "lens={steps: 30}": 30, not '30'
try:
    check(config, workflow.source_path("../schemas/config.schema.yaml"))
except PipelineError as err:
    sys.exit(f"config error: {err}")
if unpinned_references(config):  # a branch moves: the same config would fetch other weights later
    print(f"warning: hub references not pinned to a commit ({', '.join(unpinned_references(config))}); "
          f"pin them: {PIN_COMMAND}", file=sys.stderr)

SEEDS = config["seeds"]
CHECKPOINT_STEPS = sorted(config["train"]["checkpoints"])


def checkpoint_dir(arch, variant, seed, step):
    """The exported save_pretrained directory of one training run at one step."""
    return f"results/checkpoints/{arch}/{variant}/seed{seed}/step{step}"


def all_targets():
    """Every figure and table the config enables."""
    tables = config.get("tables", {})
    targets = [f"figures/{fig}.pdf" for fig in config.get("figures", {})]
    targets += [f"results/tables/{t}.{ext}" for t in tables if t != "claims" for ext in ("csv", "md")]
    if "claims" in tables:
        targets += ["results/tables/claims.parquet", "results/tables/claims.md"]
    if "claims_over_training" in tables:
        targets.append("figures/claims_over_training.pdf")
    if "survey" in config:
        targets += ["results/tables/survey.csv", "results/tables/survey.md", "figures/survey.pdf"]
    return targets


# --- Model references and pairs ------------------------------------------------------------
PAIRS = config.get("pairs", {})
FINAL_STEP = CHECKPOINT_STEPS[-1]


def is_trained(ref):
    """True for a run the pipeline trains, False for a released hub model."""
    return "arch" in ref


def reference_name(ref):
    """A model reference as text: arch/variant for a trained run, repo@revision for a hub model."""
    if is_trained(ref):
        return f"{ref['arch']}/{ref['variant']}"
    return f"{ref['hub']}@{ref.get('revision', 'main')}"


def hub_dir(repo, revision, full=False):
    """Local copy of a hub model at a revision: only its embeddings, or (`full`) every weight."""
    return f"results/hub/{'full' if full else 'embeddings'}/{repo}/{revision}"


def control_dir(repo, revision, matrix):
    """The input or output `matrix` of an untied hub model written as a tied model (survey controls)."""
    return f"results/survey/controls/{repo}/{revision}/{matrix}"


def trained_control_dir(arch, variant, seed, step, matrix):
    """The input or output `matrix` of an untied run's checkpoint written as a tied model (trained controls)."""
    return f"results/controls/{arch}/{variant}/seed{seed}/step{step}/{matrix}"


def model_dir(ref, seed, step, full=False):
    """The save_pretrained-style directory a reference resolves to."""
    if is_trained(ref):
        return checkpoint_dir(ref["arch"], ref["variant"], seed, step)
    return hub_dir(ref["hub"], ref.get("revision", "main"), full)


def released_pairs(pairs):
    """The pairs among `pairs` whose untied model is a released hub model (one pair of models, no seeds)."""
    return [p for p in pairs if not is_trained(PAIRS[p]["untied"])]


def pair_seeds(pair):
    """Seeds of a pair: its own list, else all seeds; a hub pair has one (0)."""
    p = PAIRS[pair]
    return p.get("seeds", SEEDS) if is_trained(p["untied"]) else [0]


def pair_step(pair):
    """The step a pair is compared at (hub pairs: 0, a label only)."""
    p = PAIRS[pair]
    return p.get("step", FINAL_STEP) if is_trained(p["untied"]) else 0


def pair_models(pair, seed, step=None, full=False):
    """{role: directory} of a pair's tied and untied models at `step` (default the pair's step)."""
    step = pair_step(pair) if step is None else step
    p = PAIRS[pair]
    models = {role: model_dir(p[role], seed, step, full) for role in ("tied", "untied") if role in p}
    if "control" in p:  # a negative control: the tied role is one matrix of a second untied model
        t = p["tied"]
        models["tied"] = (trained_control_dir(t["arch"], t["variant"], seed, step, p["control"]) if is_trained(t)
                          else control_dir(t["hub"], t.get("revision", "main"), p["control"]))
    return models


def evolution_models(pair, seed):
    """{step: directory} of the checkpoints of a pair's untied model, in step order."""
    ref = PAIRS[pair]["untied"]
    if is_trained(ref):
        return {s: model_dir(ref, seed, s) for s in CHECKPOINT_STEPS}
    revisions = PAIRS[pair]["evolution"]
    return {int(s): hub_dir(ref["hub"], revisions[s]) for s in sorted(revisions, key=int)}


def initial_models(pair, seed):
    """{role: step-0 directory} of a pair's untied and tied models (Figure 5's and C6c's initial norms);
    {} when step 0 is not exported."""
    return {r: d for r, d in pair_models(pair, seed, 0).items() if r in ("untied", "tied")} if 0 in CHECKPOINT_STEPS else {}


def scaled_models(pair, seed, step):
    """{variant: directory} of the pair's tied run and its input-scaled variants at `step`."""
    p = PAIRS[pair]
    variants = [p["tied"]["variant"], *p.get("scaled", [])]
    return {v: model_dir({**p["tied"], "variant": v}, seed, step) for v in variants}


def trained_runs(pairs):
    """(arch, variant, seed) of every run the given pairs train, scaled variants included."""
    runs = []
    for pair in pairs:
        p = PAIRS[pair]
        refs = [p[r] for r in ("tied", "untied") if r in p and is_trained(p[r])]
        if "tied" in p and is_trained(p["tied"]):
            refs += [{**p["tied"], "variant": v} for v in p.get("scaled", [])]
        runs += [(r["arch"], r["variant"], s) for r in refs for s in pair_seeds(pair)]
    return sorted(set(runs))


def per_seed(path, pair):
    """A per-seed metric path pattern expanded over the pair's seeds."""
    return expand(path, pair=pair, seed=pair_seeds(pair))


def scaling_steps():
    """Steps of Tables 2 (the last) and 6 (analysis.early_step), as enabled."""
    tables = config.get("tables", {})
    steps = ([config["analysis"]["early_step"]] if "table6" in tables else []) + (
        [FINAL_STEP] if "table2" in tables or "claims" in tables else []
    )
    return sorted(set(steps))


def analysis_params(pair, *keys):
    """The analysis.* values a metric job of `pair` uses, as its params (a change reruns just those jobs)."""
    return {k: config["analysis"][k] for k in keys}


def token_set(pair, seed):
    """{"tokens": the pair's analysed-token set of `seed`} for a trained pair (its metrics keep the
    tokens every run drew at least analysis.min_count times); {} for a released pair (every real row)."""
    if not is_trained(PAIRS[pair]["untied"]):
        return {}
    return {"tokens": expand(rules.token_set.output[0], pair=pair, seed=seed)[0]}


def token_set_runs(pair, seed):
    """(seed, steps, batch_size, seq_len) of the runs a trained pair compares: the batches they drew."""
    p, batch = PAIRS[pair], config["train"]["batch_size"]
    archs = {p[role]["arch"] for role in ("tied", "untied") if role in p and is_trained(p[role])}
    return sorted({(int(seed), pair_step(pair), batch, model_dims(config, a)["seq_len"]) for a in archs})


def early_steps():
    """Claim C5's early training: the steps up to analysis.early_fraction of train.steps (at least 1)."""
    return max(1, round(config["analysis"]["early_fraction"] * config["train"]["steps"]))


def claims_inputs(wildcards):
    """Per-seed metric files of the claims pairs, by claim_statistics argument name: every metric of the
    first pair; the alignment and KNN metrics of the others as further_alignment, further_knn."""
    pair, *further = claims_pairs(config)
    metrics = {"alignment": rules.alignment, "knn": rules.knn, "evolution": rules.evolution,
               "grad_flow": rules.grad_flow, "norm_freq": rules.norm_freq, "scaling": rules.scaling}
    if not is_trained(PAIRS[pair]["untied"]):
        metrics = {k: v for k, v in metrics.items() if k in ("alignment", "knn", "evolution")}
    inputs = {name: per_seed(r.output[0], pair) for name, r in metrics.items()} | {"lens": lens_metrics(pair)}
    if further:
        inputs |= {f"further_{name}": [f for p in further for f in per_seed(r.output[0], p)]
                   for name, r in (("alignment", rules.alignment), ("knn", rules.knn))}
    if not is_trained(PAIRS[pair]["untied"]):  # the fetch records naming the commits measured
        inputs["sources"] = [pair_models(pair, 0)[role] for role in ("tied", "untied")]
    paper_scale = config["analysis"].get("paper_scale_claims")
    return inputs | ({"paper_scale": paper_scale} if paper_scale else {})


def claims_at_paper_scale():
    """True when the claims pair is released checkpoints: its own numbers are the paper-scale ones."""
    return not is_trained(PAIRS[claims_pairs(config)[0]]["untied"])


def lens_inputs(pair, role, seed):
    """A lens job's inputs: the full model and token arrays in its tokenizer's ids."""
    return {"model": pair_models(pair, seed, full=True)[role], **lens_tokens(pair, role)}


def lens_tokens(pair, role):
    """Train/validation token arrays for a pair's model: the pipeline's tokens for a trained run,
    the corpus in the model's own tokenizer for a hub model."""
    ref, keys = PAIRS[pair][role], ("train", "val", "meta")
    if is_trained(ref):
        return {k: rules.tokens.output[k] for k in keys}
    return {k: expand(rules.hub_tokens.output[k], repo=ref["hub"], revision=ref.get("revision", "main"))[0]
            for k in keys}


def lens_metrics(pair):
    """Per-seed lens metric files of both models of a pair."""
    return expand(rules.lens.output.metric, pair=pair, role=("tied", "untied"), seed=pair_seeds(pair))


# --- Corpus shards and the token join (corpus.smk, tokens.smk) --------------------------------------
CORPUS_SHARDS = list(range(config["corpus"]["shards"]))


def corpus_shards():
    """Every corpus shard's documents file, in shard order."""
    return expand(rules.corpus.output.documents, shard=CORPUS_SHARDS)


def token_plan():
    """The join's line in a dry run: how many shards, and how many tokens each training run draws
    (steps x batch x sequence) beside the corpus's budget."""
    train, corpus = config["train"], config["corpus"]
    seq_len = max(model_dims(config, arch)["seq_len"] for arch in config["architectures"])
    drawn = train["steps"] * train["batch_size"] * seq_len
    budget = f"; the corpus streams up to {corpus['max_tokens']:,} words" if "max_tokens" in corpus else ""
    return (f"join {len(CORPUS_SHARDS)} token shard(s): each training run draws {train['steps']} x "
            f"{train['batch_size']} x {seq_len} = {drawn:,} tokens{budget} (the job prints the train split's tokens)")


# --- Table 7's downstream metrics (downstream.smk) ---------------------------------------------------
DOWNSTREAM = config.get("downstream", {})


def downstream_metrics():
    """Per-run downstream metric files of Table 7's runs, for each configured part."""
    runs = trained_runs(config["tables"]["table7"]) if "table7" in config.get("tables", {}) else []
    parts = [rule for name, rule in (("perplexity", rules.perplexity), ("lm_eval", rules.lm_eval)) if name in DOWNSTREAM]
    return [expand(r.output[0], arch=a, variant=v, seed=s)[0] for r in parts for a, v, s in runs]


def downstream_ids(w):
    """A downstream metric's identification columns: the run and its final step."""
    return {"arch": w.arch, "variant": w.variant, "seed": int(w.seed), "step": FINAL_STEP}


# --- The survey of released models (survey.smk) ------------------------------------------------------
SURVEY = config.get("survey", {})


def survey_pairs():
    """(run, skipped): the survey's comparisons in table order, split on gated models without a token."""
    gated, has_token = set(SURVEY.get("gated", [])), get_token() is not None
    run, skipped = [], []
    for pair in SURVEY.get("comparisons", {}):
        repos = {PAIRS[pair][role]["hub"] for role in ("tied", "untied")}
        (skipped if repos & gated and not has_token else run).append(pair)
    return run, skipped


def survey_comparison(pair):
    """A comparison's facts for survey_table: names, family, control kind, parameter counts."""
    p, params = PAIRS[pair], SURVEY.get("params", {})
    tied = reference_name(p["tied"]) + (f" ({p['control']} matrix)" if "control" in p else "")
    return {"pair": pair, "family": SURVEY["comparisons"][pair], "control": p.get("control"), "tied": tied,
            "untied": reference_name(p["untied"]), "params_tied": params.get(p["tied"]["hub"], float("nan")),
            "params_untied": params.get(p["untied"]["hub"], float("nan"))}


# --- Claims over training (trajectory.smk) -----------------------------------------------------------
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

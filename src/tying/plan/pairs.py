"""What the validated config says each pair and each trained run is: pure functions of the config.

A pair (config `pairs.<name>`) compares a tied model with an untied one. Each role is a reference:
a run this pipeline trains ({arch, variant}), a released hub model ({hub, revision}) or a local directory
save_pretrained wrote ({path}: read in place, like a fetched hub model); a pair is trained or released
(hub or local) by its untied reference, decided by `is_trained` alone. These functions say a
pair's seeds, the step it is compared at, its model directories, which metric inputs it has, and
a run's training schedule (`schedule`, the one place that reads train.steps and train.checkpoints,
and an architecture's own `train` override of them).
They take and return values and path strings; the rule files (workflow/rules/common.smk) expand
rule outputs over them, and the config check (tying.plan.checks) asks the same questions.
"""
from dataclasses import dataclass

from tying.plan import grid

ROLES = ("tied", "untied")
# A pair's per-seed metrics the claims table reads; a released claims pair has the first three only.
CLAIMS_METRICS = ("quality", "alignment", "knn", "evolution", "grad_flow", "norm_freq", "scaling")
RELEASED_CLAIMS_METRICS = ("alignment", "knn", "evolution")
FURTHER_CLAIMS_METRICS = ("alignment", "knn", "quality")  # the pairs after the first: C1, C2 and (trained) LM


# --- References ------------------------------------------------------------------------------
def is_trained(ref):
    """True for a run the pipeline trains ({arch, variant}), False for a released hub model."""
    return "arch" in ref


def is_local(ref):
    """True for a local save_pretrained directory ({path}); its path is absolute once the Snakefile has
    resolved it (tying.plan.layers.local_paths)."""
    return "path" in ref


def tokenizer_dir(ref):
    """The folder holding a local model's tokenizer: its `tokenizer` key's, else its own directory."""
    return ref.get("tokenizer", ref["path"])


def local_tokenizers(config, pair, roles=ROLES):
    """{role}_tokenizer: the folder of each of `roles` of the pair that is a local model naming a tokenizer
    folder of its own (`tokenizer:`), as a metric job's extra inputs (load_embeddings' `tokenizer`); {} otherwise."""
    p = config["pairs"][pair]
    return {f"{role}_tokenizer": p[role]["tokenizer"] for role in roles if "tokenizer" in p.get(role, {})}


def trained(config, pair):
    """True when `pair`'s untied model is a run the pipeline trains (its metrics have seeds, a token
    set, training logs); False for a released pair (one pair of models)."""
    return is_trained(config["pairs"][pair]["untied"])


def local_pair(config, pair):
    """True when both of a pair's models are local directories ({path}): the pipeline can run them, so its claims
    get an LM row (the rule local_quality), but it has neither their training data nor their training run."""
    p = config["pairs"][pair]
    return all(role in p and is_local(p[role]) for role in ROLES)


def released_models(config, pair):
    """A released pair's models as a figure title names them, "tied vs untied": a hub model's repository, a local
    directory's name; None for a trained pair (its title names its step)."""
    if trained(config, pair):
        return None
    p = config["pairs"][pair]
    name = {role: p[role]["path"].rstrip("/").rsplit("/", 1)[-1] if is_local(p[role]) else p[role]["hub"]
            for role in ROLES if role in p}
    return " vs ".join(name[role] for role in ROLES if role in name)


def released_pairs(config, pairs):
    """The pairs among `pairs` whose untied model is a released model (hub or local)."""
    return [p for p in pairs if not trained(config, p)]


def mixture_pair(config, pairs):
    """The first of `pairs` after the first that is a mixture control (control: mixture), else None."""
    return next((p for p in pairs[1:] if config["pairs"][p].get("control") == "mixture"), None)


def revision(ref):
    """A hub reference's revision (default main)."""
    return ref.get("revision", "main")


def reference_name(ref):
    """A model reference as text: arch/variant for a trained run, repo@revision for a hub model, a local
    directory's path."""
    if is_local(ref):
        return ref["path"]
    return f"{ref['arch']}/{ref['variant']}" if is_trained(ref) else f"{ref['hub']}@{revision(ref)}"


def claims_pairs(config):
    """tables.claims as a list: the pair that gets every claim, then those that get C1 and C2."""
    pairs = config.get("tables", {}).get("claims", [])
    return [pairs] if isinstance(pairs, str) else list(pairs)


def model_dims(config, arch):
    """model.* with the architecture's overrides applied (family and its train schedule removed); the
    schema leaves model.* without defaults, since an architecture's defaults would override model.*."""
    overrides = {k: v for k, v in config["architectures"][arch].items() if k not in ("family", "train")}
    return {"intermediate_size": None, "init": "auto", "clip_qkv": "auto", **config["model"], **overrides}


# --- Training schedule -----------------------------------------------------------------------
@dataclass(frozen=True)
class Schedule:
    """A trained run's schedule: optimizer `steps`, exported `checkpoints` (ascending)."""

    steps: int
    checkpoints: tuple

    @property
    def final(self):
        """The last exported step: where a pair is compared unless it names its own step."""
        return self.checkpoints[-1]


def schedule(config, ref=None):
    """The training schedule of the trained run `ref` ({arch, ...}): train.steps and train.checkpoints,
    each replaced by its architecture's `train` entry where it has one (a scaling cell's schedule);
    `ref` None (or a released model) asks for the shared train.* schedule."""
    train = config["train"]
    if ref is not None and is_trained(ref):
        train = {**train, **config["architectures"][ref["arch"]].get("train", {})}
    return Schedule(train["steps"], tuple(sorted(train["checkpoints"])))


def checkpoint_groups(config):
    """{checkpoints: [architectures]}: the architectures whose runs export the same steps, the shared
    train.checkpoints first (each group is one train rule, whose outputs are those checkpoints)."""
    groups = {schedule(config).checkpoints: []}
    for arch in config["architectures"]:
        groups.setdefault(schedule(config, {"arch": arch}).checkpoints, []).append(arch)
    return groups


def pair_schedule(config, pair):
    """The schedule of a trained pair's runs: its untied run's."""
    return schedule(config, config["pairs"][pair]["untied"])


def early_steps(config, pair=None):
    """Claim C5's early training: the steps up to analysis.early_fraction of the pair's steps (`pair`
    None: of train.steps), at least 1."""
    runs = schedule(config) if pair is None else pair_schedule(config, pair)
    return max(1, round(config["analysis"]["early_fraction"] * runs.steps))


def scaling_steps(config, pair):
    """Steps of a pair's scaling metric: Table 6's (analysis.early_step, where the pair exports it) and
    the last, for Table 2 and the claims (a scaling cell's claims among them), as enabled."""
    tables, runs = config.get("tables", {}), pair_schedule(config, pair)
    early = config["analysis"]["early_step"]
    final = "table2" in tables or "claims" in tables or "c7_dose" in tables or pair in scaling_cells(config)
    steps = ([early] if "table6" in tables and early in runs.checkpoints else []) + ([runs.final] if final else [])
    return sorted(set(steps))


# --- Directories -----------------------------------------------------------------------------
def checkpoint_dir(arch, variant, seed, step):
    """The exported save_pretrained directory of one training run at one step."""
    return f"results/checkpoints/{arch}/{variant}/seed{seed}/step{step}"


def hub_dir(repo, rev, full=False):
    """Local copy of a hub model at a revision: only its embeddings, or (`full`) every weight."""
    return f"results/hub/{'full' if full else 'embeddings'}/{repo}/{rev}"


def control_dir(repo, rev, matrix):
    """The input or output `matrix` of an untied hub model written as a tied model (survey controls)."""
    return f"results/survey/controls/{repo}/{rev}/{matrix}"


def trained_control_dir(arch, variant, seed, step, matrix):
    """The input or output `matrix` of an untied run's checkpoint written as a tied model (trained controls)."""
    return f"results/controls/{arch}/{variant}/seed{seed}/step{step}/{matrix}"


def model_dir(ref, seed, step, full=False):
    """The save_pretrained-style directory a reference resolves to (a hub model: its one copy; a local
    one: itself, whole)."""
    if is_trained(ref):
        return checkpoint_dir(ref["arch"], ref["variant"], seed, step)
    return ref["path"] if is_local(ref) else hub_dir(ref["hub"], revision(ref), full)


# --- Pairs -----------------------------------------------------------------------------------
def pair_seeds(config, pair):
    """Seeds of a pair: its own list, else config seeds; a released pair has one (0)."""
    return config["pairs"][pair].get("seeds", config["seeds"]) if trained(config, pair) else [0]


def pair_step(config, pair):
    """The step a pair is compared at: its own `step`, else its runs' final checkpoint (released: 0, a label)."""
    return config["pairs"][pair].get("step", pair_schedule(config, pair).final) if trained(config, pair) else 0


def pair_models(config, pair, seed, step=None, full=False):
    """{role: directory} of a pair's tied and untied models at `step` (default the pair's step)."""
    step = pair_step(config, pair) if step is None else step
    p = config["pairs"][pair]
    models = {role: model_dir(p[role], seed, step, full) for role in ROLES if role in p}
    if "control" in p:  # a negative control: the tied role is one matrix of a second untied model
        t = p["tied"]
        models["tied"] = (trained_control_dir(t["arch"], t["variant"], seed, step, p["control"]) if is_trained(t)
                          else control_dir(t["hub"], revision(t), p["control"]))
    return models


def evolution_models(config, pair, seed):
    """{step: directory} of the checkpoints of a pair's untied model, in step order."""
    p = config["pairs"][pair]
    ref = p["untied"]
    if is_trained(ref):
        return {s: model_dir(ref, seed, s) for s in schedule(config, ref).checkpoints}
    where = (lambda s: p["evolution"][s]) if is_local(ref) else (lambda s: hub_dir(ref["hub"], p["evolution"][s]))
    return {int(s): where(s) for s in sorted(p["evolution"], key=int)}


def initial_models(config, pair, seed):
    """{role: step-0 directory} of a pair's untied and tied models (Figure 5's and C6c's initial norms);
    {} when step 0 is not exported."""
    if 0 not in pair_schedule(config, pair).checkpoints:
        return {}
    return {r: d for r, d in pair_models(config, pair, seed, 0).items() if r in ROLES}


def scaled_variants(config, pair):
    """The pair's tied variant, then its input-scaled variants (`scaled`)."""
    p = config["pairs"][pair]
    return [p["tied"]["variant"], *p.get("scaled", [])]


def scaled_models(config, pair, seed, step):
    """{variant: directory} of the pair's tied run and its input-scaled variants at `step`."""
    tied = config["pairs"][pair]["tied"]
    return {v: model_dir({**tied, "variant": v}, seed, step) for v in scaled_variants(config, pair)}


def trained_runs(config, pairs):
    """(arch, variant, seed) of every run the given pairs train, scaled variants included."""
    runs = []
    for pair in pairs:
        p = config["pairs"][pair]
        refs = [p[r] for r in ROLES if r in p and is_trained(p[r])]
        if "tied" in p and is_trained(p["tied"]):
            refs += [{**p["tied"], "variant": v} for v in p.get("scaled", [])]
        runs += [(r["arch"], r["variant"], s) for r in refs for s in pair_seeds(config, pair)]
    return sorted(set(runs))


def analysis_params(config, pair, *keys):
    """The analysis.* values a metric job of `pair` uses, as its params (a change reruns just those jobs)."""
    return {k: config["analysis"][k] for k in keys}


def has_token_set(config, pair):
    """True when a pair's metrics keep only its analysed-token set (a trained pair: the tokens every
    run drew at least analysis.min_count times); a released pair keeps every real row."""
    return trained(config, pair)


def run_shape(config, arch, seed, steps):
    """(seed, steps, batch_size, seq_len): the batches a run of `arch` drew by step `steps`, which key its drawn
    counts and count baselines."""
    return int(seed), int(steps), config["train"]["batch_size"], model_dims(config, arch)["seq_len"]


def token_set_runs(config, pair, seed):
    """run_shape of each run a trained pair compares: the batches they drew."""
    p = config["pairs"][pair]
    archs = {p[role]["arch"] for role in ROLES if role in p and is_trained(p[role])}
    return sorted({run_shape(config, a, seed, pair_step(config, pair)) for a in archs})


def quality_runs(config, pair):
    """(role, arch, variant) of a trained pair's models: its tied and untied runs, then its input-scaled
    variants (role: the variant's name)."""
    p = config["pairs"][pair]
    runs = [(role, p[role]["arch"], p[role]["variant"]) for role in ROLES if role in p and is_trained(p[role])]
    return runs + [(v, p["tied"]["arch"], v) for v in p.get("scaled", [])]


def drawn_steps(config, steps):
    """The steps a run shape of `steps` steps counts its drawn tokens at: `steps` and the checkpoints up to it
    of every trained pair compared at `steps` (the claims over training's token sets). Pairs compared at
    other steps do not enter, so a pair's counts are the same in any config that holds it (a scaling cell
    run alone)."""
    at = {steps}
    for pair in config.get("pairs", {}):
        if trained(config, pair) and pair_step(config, pair) == steps:
            at |= {s for s in pair_schedule(config, pair).checkpoints if s <= steps}
    return sorted(at)


def lens_tokens_source(config, pair, role):
    """Where a lens of a pair's model reads its token arrays: None for a trained run (the pipeline's
    tokens), else the corpus in the model's own tokenizer: {repo, revision} of a hub model, {dir} of a local
    one (its tokenizer's folder, tokenizer_dir, absolute without the leading /: the wildcard of
    results/local/tokens/{dir})."""
    ref = config["pairs"][pair][role]
    if is_local(ref):
        return {"dir": tokenizer_dir(ref).lstrip("/")}
    return None if is_trained(ref) else {"repo": ref["hub"], "revision": revision(ref)}


# --- Claims ----------------------------------------------------------------------------------
def claims_metrics(config):
    """(metrics of the first claims pair, {metric: the further pairs that have it}): the per-seed metric names
    claim_statistics reads as its arguments; a released first pair has no training-time metrics, a released
    further pair no quality."""
    first, *further = claims_pairs(config)
    return pair_claims_metrics(config, first), {
        m: [p for p in further if m != "quality" or trained(config, p)] for m in FURTHER_CLAIMS_METRICS if further}


def claims_at_paper_scale(config):
    """True when the claims pair is released checkpoints: its own numbers are the paper-scale ones."""
    return not trained(config, claims_pairs(config)[0])


def claims_sources(config):
    """The tied and untied directories of a hub claims pair, whose fetch records name the commits
    measured; [] for a trained pair or one with a local model (no fetch, no commit)."""
    pair = claims_pairs(config)[0]
    if not all("hub" in config["pairs"][pair].get(role, {}) for role in ROLES):
        return []
    return [pair_models(config, pair, 0)[role] for role in ROLES]


def pair_claims_metrics(config, pair):
    """The per-seed metrics a pair's claims read: every claim's for a trained pair, the first three for
    a released one (no training-time metrics), a local pair's evolution only where it names its checkpoints,
    and its models' quality (local_pair); `scaling` (C7) only when the pair has the variant
    analysis.scaled_variant names."""
    if local_pair(config, pair):
        return [m for m in RELEASED_CLAIMS_METRICS if m != "evolution" or "evolution" in config["pairs"][pair]] + \
            ["quality"]
    if not trained(config, pair):
        return list(RELEASED_CLAIMS_METRICS)
    scaled = config["analysis"]["scaled_variant"] in config["pairs"][pair].get("scaled", [])
    return [m for m in CLAIMS_METRICS if m != "scaling" or scaled]


def claims_lens(config, pair):
    """True when the pair's claims table computes C3 (its `lens` flag, default true)."""
    return config["pairs"][pair].get("lens", True)


def claims_lens_reference(config, pair):
    """True when C3's certificate trains the 4x reference lens on the pair's first seed (its `lens_reference`
    flag, default true; only with a lens the pipeline trains: a given one, `lens: {tied: DIR, untied: DIR}`, has
    no budget to multiply)."""
    lens = config["pairs"][pair].get("lens", True)
    return lens is True and config["pairs"][pair].get("lens_reference", True)


def matched_null(config, pair):
    """The run a trained pair's C3 is calibrated against, its matched null: the tied role of the first control
    pair (`control: input`, `output` or `mixture`) whose untied role is `pair`'s and whose tied role is a
    trained run, a second run of the untied recipe from another start on the same batches ({arch, variant}, as
    config.yaml's `untied_b`); None where the pair's lens is not trained here or no control pair has such a run."""
    control = _null_control(config, pair)
    return None if control is None else config["pairs"][control]["tied"]


def matched_null_seeds(config, pair):
    """The seeds of `pair` its matched null run has (the control pair's seeds among the pair's)."""
    control = _null_control(config, pair)
    return [s for s in pair_seeds(config, pair) if control and s in pair_seeds(config, control)]


def _null_control(config, pair):
    p = config["pairs"][pair]
    if not trained(config, pair) or p.get("lens", True) is not True:  # no lens, or lenses the pair names
        return None
    return next((name for name, other in config["pairs"].items() if "control" in other and
                 other["untied"] == p["untied"] and is_trained(other["tied"])), None)


def scaling_cells(config):
    """The names of the scaling grid's cells (tying.plan.grid), each an architecture and pair of its own;
    [] without a scaling section."""
    return [c.name for c in grid.cells(config)] if config.get("scaling") else []


# --- Claims over training ----------------------------------------------------------------------
def trajectory_points(config, pair):
    """The pair's points in order: {step, tokens} of each checkpoint (trained) or, for a released pair,
    {tokens, tied, untied, tied_tokens, untied_tokens} (tokens seen; revisions) of each trajectory entry."""
    p = config["pairs"][pair]
    if trained(config, pair):
        batch, seq_len = config["train"]["batch_size"], model_dims(config, p["untied"]["arch"])["seq_len"]
        return [{"step": s, "tokens": s * batch * seq_len} for s in pair_schedule(config, pair).checkpoints]
    return [{"tokens": point["tokens_b"] * 1e9, "tied": point["tied"], "untied": point["untied"],
             "tied_tokens": point["tied_tokens_b"] * 1e9, "untied_tokens": point["untied_tokens_b"] * 1e9}
            for point in p["trajectory"]]


def trajectory_variants(config, pair):
    """The tied variant and analysis.scaled_variant when the pair trains it (claims C7a, C7b), else []."""
    p, scaled = config["pairs"][pair], config["analysis"]["scaled_variant"]
    return [p["tied"]["variant"], scaled] if trained(config, pair) and scaled in p.get("scaled", []) else []


def trajectory_models(config, pair, seed):
    """{tied, untied: a directory per point; scaled: one per point and trajectory variant (trained)}."""
    p = config["pairs"][pair]
    if not trained(config, pair):
        points = trajectory_points(config, pair)
        return {role: [hub_dir(p[role]["hub"], point[role]) for point in points] for role in ROLES}
    steps = pair_schedule(config, pair).checkpoints
    models = [pair_models(config, pair, seed, s) for s in steps]
    scaled = [model_dir({**p["tied"], "variant": v}, seed, s) for s in steps for v in trajectory_variants(config, pair)]
    return {role: [m[role] for m in models] for role in ROLES} | {"scaled": scaled}


def unwritten_trajectories(config):
    """Released pairs of tables.claims_over_training whose `trajectory` is still empty."""
    pairs = config.get("pairs", {})
    return [p for p in config.get("tables", {}).get("claims_over_training", [])
            if p in pairs and not trained(config, p) and not pairs[p].get("trajectory")]


# --- Table 7, the survey, the token join --------------------------------------------------------
def downstream_runs(config):
    """(arch, variant, seed) of Table 7's runs; [] without Table 7."""
    return trained_runs(config, config["tables"]["table7"]) if "table7" in config.get("tables", {}) else []


def survey_pairs(config, has_token):
    """(run, skipped): the survey's comparisons in table order, split on gated models when there is
    no Hugging Face token (`has_token` False)."""
    survey = config.get("survey", {})
    gated, run, skipped = set(survey.get("gated", [])), [], []
    for pair in survey.get("comparisons", {}):
        repos = {config["pairs"][pair][role]["hub"] for role in ROLES}
        (skipped if repos & gated and not has_token else run).append(pair)
    return run, skipped


def survey_comparison(config, pair):
    """A comparison's facts for survey_table: names, family, control kind, parameter counts."""
    p, survey = config["pairs"][pair], config["survey"]
    params = survey.get("params", {})
    tied = reference_name(p["tied"]) + (f" ({p['control']} matrix)" if "control" in p else "")
    return {"pair": pair, "family": survey["comparisons"][pair], "control": p.get("control"), "tied": tied,
            "untied": reference_name(p["untied"]), "params_tied": params.get(p["tied"]["hub"], float("nan")),
            "params_untied": params.get(p["untied"]["hub"], float("nan"))}


def token_plan(config):
    """The token join's line in a dry run: how many shards, and how many tokens each training run
    draws (steps x batch x sequence; its architecture's steps) beside the corpus's budget."""
    batch, corpus = config["train"]["batch_size"], config["corpus"]
    steps = sorted({schedule(config, {"arch": arch}).steps for arch in config["architectures"]})
    seq_len = max(model_dims(config, arch)["seq_len"] for arch in config["architectures"])
    budget = f"; the corpus streams up to {corpus['max_tokens']:,} words" if "max_tokens" in corpus else ""
    tokens = " to ".join(f"{s * batch * seq_len:,}" for s in sorted({steps[0], steps[-1]}))
    return (f"join {corpus['shards']} token shard(s): each training run draws {' or '.join(map(str, steps))} x "
            f"{batch} x {seq_len} = {tokens} tokens{budget} (the job prints the train split's tokens)")

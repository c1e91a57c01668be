"""What the prepared config says each pair is: pure functions of the config.

A pair (config `pairs.<name>`) compares a tied model with an untied one, each role a model reference
(tying.plan.references); a pair is trained or released (hub or local) by its untied reference. These functions say
a pair's seeds, the step it is compared at, its model directories and runs, and which metric inputs it has.
They take and return values and path strings; the rule files (workflow/rules/*.smk) expand rule outputs over
them, and the config check (tying.plan.checks) asks the same questions.
"""

from tying.plan.grid import scaling_cells
from tying.plan.references import reference
from tying.plan.runs import run_shape, schedule

ROLES = ("tied", "untied")


def pair_refs(config, pair):
    """{role: typed reference (tying.plan.references)} of the roles `pair` has, tied first."""
    p = config["pairs"][pair]
    return {role: reference(p[role]) for role in ROLES if role in p}


def trained(config, pair):
    """True when `pair`'s untied model is a run the pipeline trains (its metrics have seeds, a token
    set, training logs); False for a released pair (one pair of models)."""
    return reference(config["pairs"][pair]["untied"]).trained


def local_pair(config, pair):
    """True when both of a pair's models are local directories ({path}): the pipeline can run them, so its claims
    get an LM row (the rule local_quality), but it has neither their training data nor their training run."""
    refs = pair_refs(config, pair)
    return all(role in refs and refs[role].local for role in ROLES)


def local_tokenizers(config, pair, roles=ROLES):
    """{role}_tokenizer: the folder of each of `roles` of the pair that is a local model naming a tokenizer
    folder of its own (`tokenizer:`), as a metric job's extra inputs (load_embeddings' `tokenizer`); {} otherwise."""
    refs = pair_refs(config, pair)
    return {
        f"{role}_tokenizer": refs[role].tokenizer
        for role in roles
        if role in refs and refs[role].local and refs[role].tokenizer
    }


def released_models(config, pair):
    """A released pair's models as a figure title names them, "tied vs untied": a hub model's repository, a local
    directory's name; None for a trained pair (its title names its step)."""
    if trained(config, pair):
        return None
    return " vs ".join(ref.label for ref in pair_refs(config, pair).values())


def released_pairs(config, pairs):
    """The pairs among `pairs` whose untied model is a released model (hub or local)."""
    return [p for p in pairs if not trained(config, p)]


def pair_schedule(config, pair):
    """The schedule of a trained pair's runs: its untied run's."""
    return reference(config["pairs"][pair]["untied"]).schedule(config)


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
    final = (
        "table2" in tables
        or "claims" in tables
        or "c7_dose" in tables
        or pair in {c.name for c in scaling_cells(config)}
    )
    steps = ([early] if "table6" in tables and early in runs.checkpoints else []) + ([runs.final] if final else [])
    return sorted(set(steps))


def pair_seeds(config, pair):
    """Seeds of a pair: its own list, else config seeds; a released pair has one (0)."""
    return config["pairs"][pair].get("seeds", config["seeds"]) if trained(config, pair) else [0]


def pair_step(config, pair):
    """The step a pair is compared at: its own `step`, else its runs' final checkpoint (released: 0, a label)."""
    return config["pairs"][pair].get("step", pair_schedule(config, pair).final) if trained(config, pair) else 0


def pair_models(config, pair, seed, step=None, full=False):
    """{role: directory} of a pair's tied and untied models at `step` (default the pair's step); a negative
    control's tied role is one matrix of a second untied model."""
    step = pair_step(config, pair) if step is None else step
    p, refs = config["pairs"][pair], pair_refs(config, pair)
    models = {role: ref.directory(seed, step, full) for role, ref in refs.items()}
    if "control" in p:
        models["tied"] = refs["tied"].control(seed, step, p["control"])
    return models


def evolution_models(config, pair, seed):
    """{step: directory} of the checkpoints of a pair's untied model, in step order (a released pair's: its
    `evolution`)."""
    p = config["pairs"][pair]
    return reference(p["untied"]).evolution(config, seed, p.get("evolution"))


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
    tied = reference(config["pairs"][pair]["tied"])
    return {v: tied.as_variant(v).directory(seed, step) for v in scaled_variants(config, pair)}


def trained_runs(config, pairs):
    """(arch, variant, seed) of every run the given pairs train, scaled variants included."""
    runs = []
    for pair in pairs:
        refs = pair_refs(config, pair)
        trained_refs = [ref for ref in refs.values() if ref.trained]
        if "tied" in refs and refs["tied"].trained:
            trained_refs += [refs["tied"].as_variant(v) for v in config["pairs"][pair].get("scaled", [])]
        runs += [(r.arch, r.variant, s) for r in trained_refs for s in pair_seeds(config, pair)]
    return sorted(set(runs))


def analysis_params(config, pair, *keys):
    """The analysis.* values a metric job of `pair` uses, as its params (a change reruns just those jobs)."""
    return {k: config["analysis"][k] for k in keys}


def has_token_set(config, pair):
    """True when a pair's metrics keep only its analysed-token set (a trained pair: the tokens every
    run drew at least analysis.min_count times); a released pair keeps every real row."""
    return trained(config, pair)


def token_set_runs(config, pair, seed):
    """run_shape of each run a trained pair compares: the batches they drew."""
    archs = {ref.arch for ref in pair_refs(config, pair).values() if ref.trained}
    return sorted({run_shape(config, a, seed, pair_step(config, pair)) for a in archs})


def quality_runs(config, pair):
    """(role, arch, variant) of a trained pair's models: its tied and untied runs, then its input-scaled
    variants (role: the variant's name)."""
    refs = pair_refs(config, pair)
    runs = [(role, ref.arch, ref.variant) for role, ref in refs.items() if ref.trained]
    return runs + [(v, refs["tied"].arch, v) for v in config["pairs"][pair].get("scaled", [])]


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


def downstream_runs(config):
    """(arch, variant, seed) of Table 7's runs; [] without Table 7."""
    return trained_runs(config, config["tables"]["table7"]) if "table7" in config.get("tables", {}) else []

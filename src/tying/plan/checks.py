"""What the config schema cannot say, checked before any job with one-line errors: shards, schedules, pairs and
the models they name, the survey, the studies' own sections."""

import json
from dataclasses import replace
from pathlib import Path

from tying.checkpoints.layouts import vocab_size
from tying.errors import PipelineError
from tying.plan import c3_by_width, lens_budget
from tying.plan.claims import claims_pairs
from tying.plan.claims_over_training import unwritten_trajectories
from tying.plan.local_checks import check_given_lens, check_local, check_shared_tokens
from tying.plan.pairs import ROLES, local_pair, pair_refs, pair_schedule, trained
from tying.plan.recipes import clip_qkv, init_scheme
from tying.plan.references import reference
from tying.plan.runs import model_dims, schedule
from tying.plan.schema import check_schema

# Targets whose metrics read a pair's tied model, and those that follow its untied model's checkpoints.
NEEDS_TIED = {"fig1", "fig2", "fig4", "fig5", "fig6", "fig7", "table1", "table2", "table5", "table6", "claims"}
NEEDS_EVOLUTION = {"fig3", "fig8", "fig9", "claims"}
# Targets that read what only a pipeline-trained pair has: training logs, gradient provenance, token counts.
NEEDS_TRAINED = {"fig4", "fig5", "table2", "table6", "table7", "claims_by_exposure", "claims_by_lookup", "c7_dose"}
# Targets a trained control (pairs.<name>.control) may feed: its tied role is one matrix, not a model.
CONTROL_TARGETS = {"table1", "table5", "claims", "claims_by_exposure", "claims_by_lookup"}


def check(config, schema_path):
    """check_schema, then what the schema cannot say (shards, schedules, pairs, survey), as a PipelineError.
    Returns the lines a run prints once: how many token strings each pair of local models shares."""
    check_schema(config, schema_path)
    _check_shards(config["corpus"])
    train, runs = config["train"], schedule(config)
    if train["batch_size"] % (train["nproc"] * train["grad_accum"]):
        raise PipelineError(
            f"train.batch_size: {train['batch_size']} is not a multiple of train.nproc x "
            f"train.grad_accum ({train['nproc']} x {train['grad_accum']})"
        )
    late = sorted(s for s in runs.checkpoints if s > runs.steps)
    if late:
        raise PipelineError(f"train.checkpoints: {late} exceed train.steps ({runs.steps})")
    for arch in config["architectures"]:
        own = schedule(config, arch)
        late = sorted(s for s in own.checkpoints if s > own.steps)
        if late:  # only an architecture's own train entry can get here
            raise PipelineError(f"architectures.{arch}.train.checkpoints: {late} exceed its steps ({own.steps})")
        dims = model_dims(config, arch)
        family = config["architectures"][arch]["family"]
        try:
            init_scheme(family, dims["init"])
            clip_qkv(family, dims["clip_qkv"])
        except PipelineError as err:
            raise PipelineError(f"architectures.{arch}: {err}") from None
        if dims["hidden_size"] % dims["heads"]:
            raise PipelineError(
                f"architectures.{arch}: hidden_size {dims['hidden_size']} is not a multiple "
                f"of heads {dims['heads']}"
            )
    if config["lens"]["fisher"] and not config["lens"]["whiten"]:
        raise PipelineError(
            "lens.fisher: whitens the translators' output side on top of their input side; "
            "it needs lens.whiten: true"
        )
    local = _check_pairs(config)
    _check_knn(config)
    shared = check_shared_tokens(config, local, dict.fromkeys(pair for _, pair in _targets(config)))
    _check_survey(config)
    lens_budget.check(config)
    c3_by_width.check(config)
    unwritten = unwritten_trajectories(config)
    if unwritten:
        raise PipelineError(
            f"pairs.{unwritten[0]}.trajectory is empty: write it with python -m tying.hub.revisions "
            "match (docs/statistics.md, Claims over training)"
        )
    return shared


def _check_survey(config):
    """Survey comparisons are hub pairs with a tied reference; a negative control (`control`) is a
    survey comparison that no figure or table reads (its tied role is an untied model's matrix)."""
    pairs, surveyed = config.get("pairs", {}), config.get("survey", {}).get("comparisons", {})
    used = {pair for _, pair in _targets(config)}
    for name in surveyed:
        if name not in pairs:
            raise PipelineError(f"survey.comparisons: unknown pair {name!r} (pairs: {', '.join(pairs) or 'none'})")
    for name, pair in pairs.items():
        refs = pair_refs(config, name)
        if name not in surveyed and ("control" not in pair or ("tied" in refs and refs["tied"].trained)):
            continue
        if not all(role in refs and refs[role].hub for role in ROLES):
            raise PipelineError(f"pairs.{name}: the survey compares a tied and an untied released (hub) model")
        if "control" in pair and (name not in surveyed or name in used):
            raise PipelineError(
                f"pairs.{name}: a negative control (control: {pair['control']}) is read by the "
                "survey only; list it in survey.comparisons and in no figure or table"
            )


def _check_shards(corpus):
    """corpus.shards must split the source: stdlib is one part, a local shard is a block of whole files."""
    n = corpus["shards"]
    if n > 1 and corpus["source"] == "stdlib":
        raise PipelineError(f"corpus.shards: {n} shards of the stdlib source, which is one part (use 1)")
    if corpus["source"] == "local" and n > len(corpus["paths"]):
        raise PipelineError(
            f"corpus.shards: {n} shards of {len(corpus['paths'])} local files (a shard is a block of whole files)"
        )


def _check_pairs(config):
    """Cross-references the schema cannot state: names that must exist, steps that must be exported. Returns
    {(pair, role): (token strings by id, rows)} of each local model (check_local)."""
    pairs, local = config.get("pairs", {}), {}
    for name, pair in pairs.items():
        for role, ref in pair_refs(config, name).items():
            if ref.trained:
                if ref.arch not in config["architectures"]:
                    raise PipelineError(
                        f"pairs.{name}.{role}.arch: unknown architecture {ref.arch!r} "
                        f"(architectures: {', '.join(config['architectures'])})"
                    )
                if ref.variant not in config["variants"]:
                    raise PipelineError(
                        f"pairs.{name}.{role}.variant: unknown variant {ref.variant!r} "
                        f"(variants: {', '.join(config['variants'])})"
                    )
                if config["variants"][ref.variant].get("data_offset"):
                    raise PipelineError(
                        f"pairs.{name}.{role}.variant: {ref.variant!r} trains on another seed's "
                        "batches (data_offset), and a pair's runs share their seed's; compare it in "
                        "lens_budget.comparisons"
                    )
                wanted = role == "tied" and "control" not in pair  # a control's tied role is an untied run
                if config["variants"][ref.variant]["tied"] != wanted:
                    raise PipelineError(
                        f"pairs.{name}.{role}.variant: {ref.variant!r} is not "
                        f"{'tied' if wanted else 'untied'}"
                        + (" (a control's tied role is an untied run)" if "control" in pair else "")
                    )
            if ref.local:
                control = role == "tied" and "control" in pair  # a control's tied role is an untied model
                local[name, role] = check_local(
                    f"pairs.{name}.{role}.path", ref, tied=role == "tied" and not control, control=control
                )
        if isinstance(pair.get("lens"), dict):
            check_given_lens(config, name, pair)
        untied = reference(pair["untied"])
        if untied.local:
            for step, path in pair.get("evolution", {}).items():  # checkpoints of the untied model: its tokenizer
                check_local(
                    f"pairs.{name}.evolution.{step}",
                    replace(untied, path=path),
                    tied=False,
                    tokenizer_key=f"pairs.{name}.untied.tokenizer",
                )
            if pair.get("trajectory"):
                raise PipelineError(
                    f"pairs.{name}.trajectory: matched hub revisions; a local pair has none "
                    "(its evolution names its checkpoints' directories)"
                )
        for variant in pair.get("scaled", []):
            if not config["variants"].get(variant, {}).get("tied"):
                tied = [v for v, spec in config["variants"].items() if spec.get("tied")]
                raise PipelineError(
                    f"pairs.{name}.scaled: {variant!r} is not a tied variant "
                    f"(tied variants: {', '.join(tied) or 'none'})"
                )
        if pair.get("step") is not None and pair["step"] not in pair_schedule(config, name).checkpoints:
            raise PipelineError(
                f"pairs.{name}.step: {pair['step']} is not one of train.checkpoints "
                f"({', '.join(map(str, pair_schedule(config, name).checkpoints))})"
            )
    for key, pair in _targets(config):
        if pair not in pairs:
            raise PipelineError(f"{key}: unknown pair {pair!r} (pairs: {', '.join(pairs) or 'none'})")
        target = key.split(".")[1]
        if "control" in pairs[pair] and target not in CONTROL_TARGETS:
            raise PipelineError(
                f"{key}: pair {pair!r} is a negative control, read by {', '.join(sorted(CONTROL_TARGETS))} only"
            )
        if target == "claims" and "control" in pairs[pair] and pair == claims_pairs(config)[0]:
            raise PipelineError(
                f"{key}: the first claims pair gets every claim; a negative control ({pair!r}) can only follow it"
            )
        if target in NEEDS_TRAINED and not trained(config, pair):
            raise PipelineError(
                f"{key}: pair {pair!r} is released models, and {target} reads what only a pair the "
                "pipeline trains has (training logs, gradient provenance, token counts)"
            )
        if target in NEEDS_TIED and "tied" not in pairs[pair]:
            raise PipelineError(f"{key}: pair {pair!r} has no tied model, and {target} compares tied with untied")
        further_claims = target == "claims" and pair != claims_pairs(config)[0]  # C1 and C2 only
        local_claims = target == "claims" and local_pair(config, pair)  # without checkpoints: C4 not testable here
        if (
            target in NEEDS_EVOLUTION
            and not further_claims
            and not local_claims
            and not trained(config, pair)
            and "evolution" not in pairs[pair]
        ):
            local = reference(pairs[pair]["untied"]).local
            raise PipelineError(
                f"{key}: {'local' if local else 'hub'} pair {pair!r} has no evolution (training step "
                f"-> {'directory' if local else 'revision'} of its untied model)"
            )
    dose = config.get("tables", {}).get("c7_dose")
    if dose in pairs and not pairs[dose].get("scaled"):
        raise PipelineError(
            f"tables.c7_dose: pair {dose!r} has no input-scaled variants (pairs.{dose}.scaled), "
            "so no dose but the tied run's"
        )
    ceiling = config["analysis"]["ceiling_variant"]
    if dose in pairs and config["variants"].get(ceiling, {}).get("tied", True):
        raise PipelineError(
            f"analysis.ceiling_variant: {ceiling!r} is not an untied variant "
            f"({', '.join(v for v, spec in config['variants'].items() if not spec['tied']) or 'none'}); "
            "the C7 dose table divides C7a and C7b by a second untied run's cosines"
        )
    table6 = config.get("tables", {}).get("table6")
    if table6 in pairs and config["analysis"]["early_step"] not in pair_schedule(config, table6).checkpoints:
        raise PipelineError(f"analysis.early_step: {config['analysis']['early_step']} is not one of train.checkpoints")
    return local


def _check_knn(config):
    """analysis.knn_k below the vocabulary of each pair a target reads, where the check can know it: a trained
    pair's (tokenizer.vocab_size, unless a pretrained tokenizer's), a local model's (its config.json); a hub
    model's is known once fetched."""
    k = config["analysis"]["knn_k"]
    for _, name in _targets(config):
        if trained(config, name):
            vocab = None if config["tokenizer"].get("pretrained") else config["tokenizer"]["vocab_size"]
            source = "tokenizer.vocab_size"
        else:
            refs = [ref for ref in pair_refs(config, name).values() if ref.local]
            sizes = [vocab_size(json.loads((Path(ref.path) / "config.json").read_text())) for ref in refs]
            vocab = min((v for v in sizes if v), default=None)
            source = "its config.json's vocab_size"
        if vocab is not None and k >= vocab:
            raise PipelineError(
                f"analysis.knn_k: {k} neighbours of each token, but pair {name!r} has {vocab} tokens "
                f"({source}); give fewer"
            )


def _targets(config):
    """(config key, pair) for each pair a figure or table reads: ("tables.table1", "main"), ..."""
    wanted = [(f"figures.{k}", v) for k, v in config.get("figures", {}).items()]
    for key, value in config.get("tables", {}).items():
        wanted += [(f"tables.{key}", v) for v in (value if isinstance(value, list) else [value])]
    return wanted

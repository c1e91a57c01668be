"""What the claims table (config `tables.claims`) and a scaling cell's claims read, as pure functions of the
config: the pairs, each pair's per-seed metrics (by claim_statistics argument name), its lens inputs and its
matched null run, and where its numbers come from."""

from tying.plan.pairs import ROLES, local_pair, pair_models, pair_refs, pair_seeds, trained
from tying.plan.references import reference

# A pair's per-seed metrics the claims table reads; a released claims pair has the first three only.
CLAIMS_METRICS = ("quality", "alignment", "knn", "evolution", "grad_flow", "norm_freq", "scaling")
RELEASED_CLAIMS_METRICS = ("alignment", "knn", "evolution")
FURTHER_CLAIMS_METRICS = ("alignment", "knn", "quality")  # the pairs after the first: C1, C2 and (trained) LM


def claims_pairs(config):
    """tables.claims as a list: the pair that gets every claim, then those that get C1 and C2."""
    pairs = config.get("tables", {}).get("claims", [])
    return [pairs] if isinstance(pairs, str) else list(pairs)


def mixture_pair(config, pairs):
    """The first of `pairs` after the first that is a mixture control (control: mixture), else None."""
    return next((p for p in pairs[1:] if config["pairs"][p].get("control") == "mixture"), None)


def claims_metrics(config):
    """(metrics of the first claims pair, {metric: the further pairs that have it}): the per-seed metric names
    claim_statistics reads as its arguments; a released first pair has no training-time metrics, a released
    further pair no quality."""
    first, *further = claims_pairs(config)
    return pair_claims_metrics(config, first), {
        m: [p for p in further if m != "quality" or trained(config, p)] for m in FURTHER_CLAIMS_METRICS if further
    }


def claims_at_paper_scale(config):
    """True when the claims pair is released checkpoints: its own numbers are the paper-scale ones."""
    return not trained(config, claims_pairs(config)[0])


def claims_sources(config):
    """The tied and untied directories of a hub claims pair, whose fetch records name the commits
    measured; [] for a trained pair or one with a local model (no fetch, no commit)."""
    pair = claims_pairs(config)[0]
    refs = pair_refs(config, pair)
    if not all(role in refs and refs[role].hub for role in ROLES):
        return []
    return [pair_models(config, pair, 0)[role] for role in ROLES]


def pair_claims_metrics(config, pair):
    """The per-seed metrics a pair's claims read: every claim's for a trained pair, the first three for
    a released one (no training-time metrics), a local pair's evolution only where it names its checkpoints,
    and its models' quality (local_pair); `scaling` (C7) only when the pair has the variant
    analysis.scaled_variant names."""
    if local_pair(config, pair):
        return [m for m in RELEASED_CLAIMS_METRICS if m != "evolution" or "evolution" in config["pairs"][pair]] + [
            "quality"
        ]
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
    return next(
        (
            name
            for name, other in config["pairs"].items()
            if "control" in other and other["untied"] == p["untied"] and reference(other["tied"]).trained
        ),
        None,
    )


# A claims job's inputs are grouped: the first pair's metrics ("first", by claim_statistics argument name), the
# further pairs' ("further") and the per-token ones ("exposure"); a rule's named inputs are flat, so a group's are
# named <group>__<name>.
GROUP = "__"


def flat_inputs(inputs):
    """A claims job's `inputs`, {group: {name: files}} and {name: files} entries, as the flat named inputs a rule
    takes: a group's names as <group>__<name> (nested_inputs reads them back)."""
    flat = {}
    for key, value in inputs.items():
        flat |= (
            {f"{key}{GROUP}{name}": files for name, files in value.items()} if isinstance(value, dict) else {key: value}
        )
    return flat


def nested_inputs(named):
    """The {group: {name: files}} and {name: files} of flat_inputs, from a job's (name, files) pairs."""
    nested = {}
    for key, files in named:
        group, _, name = key.partition(GROUP)
        if name:
            nested.setdefault(group, {})[name] = files
        else:
            nested[key] = files
    return nested

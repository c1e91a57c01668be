"""What claims over training (config `tables.claims_over_training`) reads, as pure functions of the config: each
pair's points (a trained pair's checkpoints; a released pair's `trajectory`, matched hub revisions written by
python -m tying.hub.revisions match) and its models at each point."""

from tying.plan.pairs import ROLES, pair_models, pair_refs, pair_schedule, trained
from tying.plan.runs import model_dims


def trajectory_points(config, pair):
    """The pair's points in order: {step, tokens} of each checkpoint (trained) or, for a released pair,
    {tokens, tied, untied, tied_tokens, untied_tokens} (tokens seen; revisions) of each trajectory entry."""
    p = config["pairs"][pair]
    if trained(config, pair):
        arch = pair_refs(config, pair)["untied"].arch
        batch, seq_len = config["train"]["batch_size"], model_dims(config, arch)["seq_len"]
        return [{"step": s, "tokens": s * batch * seq_len} for s in pair_schedule(config, pair).checkpoints]
    return [
        {
            "tokens": point["tokens_b"] * 1e9,
            "tied": point["tied"],
            "untied": point["untied"],
            "tied_tokens": point["tied_tokens_b"] * 1e9,
            "untied_tokens": point["untied_tokens_b"] * 1e9,
        }
        for point in p["trajectory"]
    ]


def trajectory_variants(config, pair):
    """The tied variant and analysis.scaled_variant when the pair trains it (claims C7a, C7b), else []."""
    p, scaled = config["pairs"][pair], config["analysis"]["scaled_variant"]
    return [p["tied"]["variant"], scaled] if trained(config, pair) and scaled in p.get("scaled", []) else []


def trajectory_models(config, pair, seed):
    """{tied, untied: a directory per point; scaled: one per point and trajectory variant (trained)}; a released
    pair's point names each role's hub revision."""
    refs = pair_refs(config, pair)
    if not trained(config, pair):
        points = trajectory_points(config, pair)
        return {role: [refs[role].at(point[role]).directory(seed, 0) for point in points] for role in ROLES}
    steps = pair_schedule(config, pair).checkpoints
    models = [pair_models(config, pair, seed, s) for s in steps]
    scaled = [refs["tied"].as_variant(v).directory(seed, s) for s in steps for v in trajectory_variants(config, pair)]
    return {role: [m[role] for m in models] for role in ROLES} | {"scaled": scaled}


def unwritten_trajectories(config):
    """Released pairs of tables.claims_over_training whose `trajectory` is still empty."""
    pairs = config.get("pairs", {})
    return [
        p
        for p in config.get("tables", {}).get("claims_over_training", [])
        if p in pairs and not trained(config, p) and not pairs[p].get("trajectory")
    ]

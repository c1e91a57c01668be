"""What the survey of released models (config `survey`) reads, as pure functions of the config: its
comparisons, those a missing Hugging Face token skips, and each comparison's facts for the table."""

from tying.plan.pairs import ROLES, pair_refs


def survey_pairs(config, has_token):
    """(run, skipped): the survey's comparisons in table order, split on gated models when there is
    no Hugging Face token (`has_token` False)."""
    survey = config.get("survey", {})
    gated, run, skipped = set(survey.get("gated", [])), [], []
    for pair in survey.get("comparisons", {}):
        repos = {pair_refs(config, pair)[role].repo for role in ROLES}
        (skipped if repos & gated and not has_token else run).append(pair)
    return run, skipped


def survey_comparison(config, pair):
    """A comparison's facts for survey_table: names, family, control kind, parameter counts."""
    p, refs, survey = config["pairs"][pair], pair_refs(config, pair), config["survey"]
    params = survey.get("params", {})
    tied = refs["tied"].name + (f" ({p['control']} matrix)" if "control" in p else "")
    return {
        "pair": pair,
        "family": survey["comparisons"][pair],
        "control": p.get("control"),
        "tied": tied,
        "untied": refs["untied"].name,
        "params_tied": params.get(refs["tied"].repo, float("nan")),
        "params_untied": params.get(refs["untied"].repo, float("nan")),
    }

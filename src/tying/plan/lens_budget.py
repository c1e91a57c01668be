"""C3 against the lens's budget, as the config's `lens_budget:` section plans it.

    lens_budget:
      procedures: [logit, tuned_lens, certified]   # tying.lens.procedures
      steps: [10, 30, 100, 250, 500, 1000, 2000]   # each procedure's budgets (the logit lens: 0 steps)
      batch_sizes: [8, 64, 512]                    # tuned_lens's windows a step (default: lens.batch_size)
      seeds: [0, 1, 2]                             # default: the config's seeds
      comparisons:                                 # C3 = run a's early-state KL minus run b's, per seed
        tying: {a: {arch: olmo, variant: tied}, b: {arch: olmo, variant: untied}}
        matched_null: {a: {arch: olmo, variant: untied}, b: {arch: olmo, variant: untied_b}}
        tied_seeds: {a: {arch: olmo, variant: tied}, b: {arch: olmo, variant: tied, seed_offset: 1}, seeds: [0, 2]}
        untied_steps: {a: {arch: olmo, variant: untied, step: 600}, b: {arch: olmo, variant: untied}}

The first comparison is the tying one; the others are null pairs, two models that differ in one thing other
than tying (`varies` says what, from the runs). A run is a trained run {arch, variant} at `step` (default its
final checkpoint), of the seed plus `seed_offset`; a comparison's own `seeds` replace the section's (a seed
null's disjoint pairs (0, 1), (2, 3): seeds [0, 2] with seed_offset 1, so no model is in two of its pairs).
Every run gets one sweep job (every procedure, budget and batch on it); runs shared by comparisons are swept
once. `batch_sizes` sets the tuned_lens procedure's windows (of lens.seq_len tokens) a step, one lens each at
every budget; the certified lens is the config's recipe and keeps lens.batch_size.
"""

from tying.errors import PipelineError
from tying.plan.runs import schedule

TABLE = "results/tables/lens_budget"
FIGURE = "figures/lens_budget.pdf"
# What a comparison's two runs may differ in, as `varies` names it, in the order the text gives them.
FACETS = {
    "tying": "tying",
    "start": "the initialisation",
    "batches": "the batches (data order)",
    "length": "the training length",
    "arch": "the architecture",
    "scale": "the input-path gradient scale",
}


def built(config):
    """True when the config has comparisons to sweep."""
    return bool(config.get("lens_budget", {}).get("comparisons"))


def comparison_seeds(config, spec=None):
    """The seeds a comparison (`spec`; None: any without its own) is measured on: its `seeds`, else the section's,
    else the config's."""
    own = (spec or {}).get("seeds")
    return own if own is not None else config["lens_budget"].get("seeds", config["seeds"])


def run_at(config, ref, seed):
    """(arch, variant, seed, step) of a comparison's run `ref` for `seed`."""
    step = ref.get("step", schedule(config, ref["arch"]).final)
    return ref["arch"], ref["variant"], seed + ref.get("seed_offset", 0), step


def comparisons(config):
    """Every (comparison, seed) as {"comparison", "seed", "a", "b"}, runs as `run_at` gives them, in config order."""
    return [
        {"comparison": name, "seed": seed, "a": run_at(config, spec["a"], seed), "b": run_at(config, spec["b"], seed)}
        for name, spec in config["lens_budget"]["comparisons"].items()
        for seed in comparison_seeds(config, spec)
    ]


def sweep_runs(config):
    """The runs the comparisons read, each once, sorted."""
    return sorted({comp[role] for comp in comparisons(config) for role in ("a", "b")})


def sweep_path(arch, variant, seed, step):
    """One run's sweep: held-out KL per state of every procedure, budget and batch."""
    return f"results/metrics/lens_budget/{arch}/{variant}/seed{seed}/step{step}.parquet"


def facts(config, ref):
    """What determines a comparison run's model, by FACETS key: its tying, start (seed offset, tying, init_offset:
    tied and untied runs of a seed start from different draws, tying.train.models.init_seed), batches (seed
    offset plus data_offset), length (its step), architecture and input-path gradient scale."""
    variant = config["variants"][ref["variant"]]
    offset = ref.get("seed_offset", 0)
    return {
        "tying": variant["tied"],
        "start": (offset, variant["tied"], variant.get("init_offset", 0)),
        "batches": offset + variant.get("data_offset", 0),
        "length": ref.get("step", schedule(config, ref["arch"]).final),
        "arch": ref["arch"],
        "scale": variant.get("input_grad_scale", 1.0),
    }


def varies(config, spec):
    """The FACETS keys in which a comparison's runs a and b differ, in FACETS order."""
    a, b = facts(config, spec["a"]), facts(config, spec["b"])
    return [key for key in FACETS if a[key] != b[key]]


def described(config):
    """{comparison: {"runs": its runs as text, "varies": `varies`, "text": a sentence saying what the comparison
    varies and what it holds, from its runs}}, in config order."""
    out = {}
    for name, spec in config["lens_budget"]["comparisons"].items():
        moved = varies(config, spec)
        held = [FACETS[k] for k in ("tying", "start", "batches", "length") if k not in moved]
        text = f"varies {_listed([FACETS[k] for k in moved]) or 'nothing'}"
        out[name] = {
            "runs": f"a = {_run_text(spec['a'])}, b = {_run_text(spec['b'])}",
            "varies": moved,
            "text": text + (f"; holds {_listed(held)}" if held else ""),
        }
    return out


def _run_text(ref):
    at = f" at step {ref['step']}" if "step" in ref else ""
    offset = f", seed + {ref['seed_offset']}" if ref.get("seed_offset") else ""
    return f"{ref['arch']}/{ref['variant']}{at}{offset}"


def _listed(items):
    return ", ".join(items[:-1]) + (" and " if len(items) > 1 else "") + items[-1] if items else ""


def check(config):
    """Each comparison's runs name an architecture and a variant of the config, at one of the run's exported steps."""
    for name, spec in config.get("lens_budget", {}).get("comparisons", {}).items():
        for role in ("a", "b"):
            ref, where = spec[role], f"lens_budget.comparisons.{name}.{role}"
            for key, known in (("arch", "architectures"), ("variant", "variants")):
                if ref[key] not in config[known]:
                    raise PipelineError(f"{where}: {key} {ref[key]!r} is not in {known} ({', '.join(config[known])})")
            steps = schedule(config, ref["arch"]).checkpoints
            if ref.get("step", steps[-1]) not in steps:
                raise PipelineError(f"{where}: step {ref['step']} is not one of the run's exported steps {list(steps)}")

"""C3 against the lens's budget, as the config's `lens_budget:` section plans it.

    lens_budget:
      procedures: [logit, tuned_lens, certified]   # tying.lens.procedures
      steps: [10, 30, 100, 250, 500, 1000, 2000]   # each procedure's budgets (the logit lens: 0 steps)
      seeds: [0, 1, 2]                             # default: the config's seeds
      comparisons:                                 # C3 = run a's early-state KL minus run b's, per seed
        tying: {a: {arch: olmo, variant: tied}, b: {arch: olmo, variant: untied}}
        seeds: {a: {arch: olmo, variant: tied}, b: {arch: olmo, variant: tied, seed_offset: 1}}
        steps: {a: {arch: olmo, variant: untied, step: 600}, b: {arch: olmo, variant: untied}}

The first comparison is the tying one; the others are null pairs, two models that differ in one thing other
than tying. A run is a trained run {arch, variant} at `step` (default its final checkpoint), of the seed plus
`seed_offset`. Every run gets one sweep job (every procedure and budget on it); runs shared by comparisons
are swept once.
"""
from tying.errors import PipelineError
from tying.plan.pairs import schedule

TABLE = "results/tables/c3_by_lens"
FIGURE = "figures/c3_by_lens.pdf"


def built(config):
    """True when the config has comparisons to sweep."""
    return bool(config.get("lens_budget", {}).get("comparisons"))


def budget_seeds(config):
    """The seeds each comparison is measured on."""
    return config["lens_budget"].get("seeds", config["seeds"])


def run_at(config, ref, seed):
    """(arch, variant, seed, step) of a comparison's run `ref` for `seed`."""
    step = ref.get("step", schedule(config, ref).final)
    return ref["arch"], ref["variant"], seed + ref.get("seed_offset", 0), step


def comparisons(config):
    """Every (comparison, seed) as {"comparison", "seed", "a", "b"}, runs as `run_at` gives them, in config order."""
    return [{"comparison": name, "seed": seed, "a": run_at(config, spec["a"], seed), "b": run_at(config, spec["b"], seed)}
            for name, spec in config["lens_budget"]["comparisons"].items() for seed in budget_seeds(config)]


def budget_runs(config):
    """The runs the comparisons read, each once, sorted."""
    return sorted({comp[role] for comp in comparisons(config) for role in ("a", "b")})


def sweep_path(arch, variant, seed, step):
    """One run's sweep: held-out KL per state of every procedure and budget."""
    return f"results/metrics/lens_budget/{arch}/{variant}/seed{seed}/step{step}.parquet"


def check(config):
    """Each comparison's runs name an architecture and a variant of the config, at one of the run's exported steps."""
    for name, spec in config.get("lens_budget", {}).get("comparisons", {}).items():
        for role in ("a", "b"):
            ref, where = spec[role], f"lens_budget.comparisons.{name}.{role}"
            for key, known in (("arch", "architectures"), ("variant", "variants")):
                if ref[key] not in config[known]:
                    raise PipelineError(f"{where}: {key} {ref[key]!r} is not in {known} ({', '.join(config[known])})")
            steps = schedule(config, ref).checkpoints
            if ref.get("step", steps[-1]) not in steps:
                raise PipelineError(f"{where}: step {ref['step']} is not one of the run's exported steps {list(steps)}")

"""The scaling sweep's grid: cells over model size and training steps, as pure functions of the config.

A config's `scaling:` section describes the grid; everything else (corpus, tokenizer, train, variants,
analysis, lens) is the config's own, shared by every cell:

    scaling:
      family: olmo                # the only family: its parameter counts below are exact
      head_dim: 24                # heads = hidden_size / head_dim unless a size names its heads (default 64)
      mlp_ratio: 4                # intermediate_size = mlp_ratio x hidden_size unless a size names it (default 4)
      sizes:                      # the model-size axis: hidden size together with layers, small to large
        - {hidden_size: 64, layers: 2}
        - {hidden_size: 96, layers: 3, heads: 4, intermediate_size: 384}   # heads, intermediate_size: optional
        - {hidden_size: 96, layers: 6, scaled: []}   # scaled: this size's own input-scaled variants
        - {hidden_size: 96, layers: 12, steps: [3000]}   # steps: this size's own budgets in place of scaling.steps
        - {hidden_size: 384, layers: 3, lr: 0.002}   # lr: this size's peak learning rate in place of train.lr
      steps: [300, 1500]          # the token-budget axis: optimizer steps of each run (optional when every
                                  # size names its own)
      checkpoint_fractions: [0, 1]  # exported steps, as fractions of a cell's steps (0 and 1 required)
      seeds: [0, 1, 2]            # 3 or more for verdicts (MIN_SEEDS); fewer give the direction only
      tied: tied                  # names in `variants`: the tied run, the untied run, the input-scaled runs
      untied: untied
      scaled: [tied_x5]
      lens: all                   # cells that get the tuned lens (claim C3): all, or a list of cell names
      lens_reference: all         # lens cells whose C3 certificate also trains the 4x reference lens
      exclude: []                 # cells of the sizes x steps product left out, by name
      c3_by_depth: false          # also C3 against depth over the lens cells, which need one a depth
      c3_by_width: false          # also C3 by state against width over the lens cells, which need one a width

A cell is one (size, steps) of the product, less `exclude`; its name is `d{hidden}_l{layers}_s{steps}`
(d96_l3_s300). A size with its own `steps` crosses those instead of the shared axis: models of different
depth reach the same margin over their bigram table in different numbers of steps. Each cell trains
tied, untied and each scaled variant for every seed, on train.batch_size x model.seq_len tokens a step
(tokens = steps x batch x seq_len) and vocabulary tokenizer.vocab_size. A cell becomes one architecture
and one pair, both named after it (`config_entries`): cells with the same size but different steps are
separate runs, since the learning-rate schedule depends on the total steps, so a 300-step run is not a
1500-step run's step-300 checkpoint. Its architecture entry carries the cell's schedule as
`architectures.<cell>.train: {steps, checkpoints}`, a per-architecture override of train.steps and
train.checkpoints that tying.plan.runs.schedule reads, and a size's own `lr` as `train.lr` there, which
tying.plan.run_params.run_params reads in place of train.lr (models of different width train stably at
different rates). `add_cells` adds the entries to the config as it is
prepared (tying.plan.config.prepared, before the config check), so each cell is an ordinary
architecture and pair to every rule.

Parameters are counted as transformers builds OlmoForCausalLM: per block four d x d attention
projections and three d x intermediate MLP matrices, no biases, and OLMo's layer norms have no
weights; the embedding is V x d, twice that untied. `params` and `embedding_share` are the tied
model's; the untied model's are beside them.
"""

from dataclasses import dataclass, replace

from tying.errors import PipelineError

FAMILY = "olmo"
MIN_SEEDS = 3  # the fewest seeds a claim's verdict needs (tying.claims.verdicts); fewer: its direction only
SHAPE_COLUMNS = ["cell", "hidden_size", "layers", "steps"]  # a cell's size and steps
FACT_COLUMNS = [
    "cell",
    "hidden_size",
    "layers",
    "heads",
    "intermediate_size",
    "steps",
    "tokens",
    "params",
    "non_embedding_params",
    "embedding_params",
    "embedding_share",
    "params_untied",
    "embedding_share_untied",
    "lens",
]


def olmo_params(hidden_size, layers, intermediate_size, vocab_size, tied=True):
    """(non-embedding, embedding) parameter counts of an OlmoForCausalLM as transformers builds it."""
    non_embedding = layers * (4 * hidden_size**2 + 3 * hidden_size * intermediate_size)
    return non_embedding, (1 if tied else 2) * vocab_size * hidden_size


@dataclass(frozen=True)
class Cell:
    """One grid cell: a model size trained for a number of steps, for every seed and variant."""

    hidden_size: int
    layers: int
    heads: int
    intermediate_size: int
    steps: int
    checkpoints: tuple
    seeds: tuple
    batch_size: int
    seq_len: int
    vocab_size: int
    tied: str = "tied"
    untied: str = "untied"
    scaled: tuple = ("tied_x5",)
    lens: bool = True
    lens_reference: bool = True
    lr: float | None = None  # the size's own peak learning rate; None: train.lr

    @property
    def name(self):
        return cell_name(self.hidden_size, self.layers, self.steps)

    @property
    def tokens(self):
        """Tokens each run draws: steps x batch x seq_len."""
        return self.steps * self.batch_size * self.seq_len

    def params(self, tied=True):
        """(non-embedding, embedding) parameters of the cell's tied (or untied) model."""
        return olmo_params(self.hidden_size, self.layers, self.intermediate_size, self.vocab_size, tied)

    def embedding_share(self, tied=True):
        non_embedding, embedding = self.params(tied)
        return embedding / (non_embedding + embedding)

    def architecture(self):
        """The cell's `architectures` entry: family, dims, and its schedule (and its own lr) under `train`."""
        train = {"steps": self.steps, "checkpoints": list(self.checkpoints)}
        return {
            "family": FAMILY,
            "hidden_size": self.hidden_size,
            "layers": self.layers,
            "heads": self.heads,
            "intermediate_size": self.intermediate_size,
            "train": train | ({"lr": self.lr} if self.lr is not None else {}),
        }

    def pair(self):
        """The cell's `pairs` entry: its tied and untied runs, the scaled variants, the seeds, the lens flags."""
        return {
            "tied": {"arch": self.name, "variant": self.tied},
            "untied": {"arch": self.name, "variant": self.untied},
            "scaled": list(self.scaled),
            "seeds": list(self.seeds),
            "lens": self.lens,
            "lens_reference": self.lens_reference,
        }

    def facts(self):
        """One row of `facts`: the cell's dims, schedule and parameter counts."""
        non_embedding, embedding = self.params()
        return {
            "cell": self.name,
            "hidden_size": self.hidden_size,
            "layers": self.layers,
            "heads": self.heads,
            "intermediate_size": self.intermediate_size,
            "steps": self.steps,
            "tokens": self.tokens,
            "params": non_embedding + embedding,
            "non_embedding_params": non_embedding,
            "embedding_params": embedding,
            "embedding_share": self.embedding_share(),
            "params_untied": sum(self.params(tied=False)),
            "embedding_share_untied": self.embedding_share(tied=False),
            "lens": self.lens,
        }


def cell_name(hidden_size, layers, steps):
    """A cell's name: d96_l3_s300."""
    return f"d{hidden_size}_l{layers}_s{steps}"


def cells(config):
    """The cells of config `scaling`, size-major (sizes in their order, then steps ascending)."""
    grid = config.get("scaling")
    if not grid:
        raise PipelineError("scaling: the config has no scaling section")
    if grid.get("family", FAMILY) != FAMILY:
        raise PipelineError(f"scaling.family: {grid['family']!r}; the grid counts parameters for {FAMILY} only")
    seeds = tuple(grid["seeds"])
    if not seeds:
        raise PipelineError(f"scaling.seeds: no seeds; give at least {MIN_SEEDS} for the claims' verdicts")
    variants = _variants(config, grid)
    fractions = sorted(set(grid.get("checkpoint_fractions", [0, 1])))
    if fractions[0] != 0 or fractions[-1] != 1:
        raise PipelineError(
            f"scaling.checkpoint_fractions: {fractions} must run from 0 to 1 (step 0 and the final "
            "step are exported)"
        )
    out = []
    for i, size in enumerate(grid["sizes"]):
        dims = _dims(grid, size, f"scaling.sizes.{i}")
        own = _variants(config, {**grid, "scaled": size["scaled"]}) if "scaled" in size else variants
        for steps in _steps(grid, size, f"scaling.sizes.{i}"):
            checkpoints = tuple(sorted({round(f * steps) for f in fractions}))
            out.append(
                Cell(
                    **dims,
                    steps=steps,
                    checkpoints=checkpoints,
                    seeds=seeds,
                    batch_size=config["train"]["batch_size"],
                    seq_len=config["model"]["seq_len"],
                    vocab_size=config["tokenizer"]["vocab_size"],
                    lr=size.get("lr"),
                    **own,
                )
            )
    names = [c.name for c in out]
    if len(set(names)) < len(names):
        raise PipelineError(
            "scaling.sizes: two sizes share a hidden size and layer count, so their cells' names "
            f"collide ({sorted({n for n in names if names.count(n) > 1})})"
        )
    excluded = set(grid.get("exclude", []))
    listed = {key: _cell_list(grid, key) for key in ("lens", "lens_reference")}
    for key, cell_names in (("exclude", excluded), *listed.items()):
        unknown = sorted(set(cell_names or ()) - set(names))
        if unknown:
            raise PipelineError(f"scaling.{key}: unknown cells {unknown} (cells: {', '.join(names)})")
    lens, reference = listed["lens"], listed["lens_reference"]
    stray = sorted((reference or set()) - (set(names) if lens is None else lens))
    if stray:
        raise PipelineError(f"scaling.lens_reference: {stray} are not lens cells (scaling.lens)")
    out = [
        replace(c, lens=_listed(lens, c.name), lens_reference=_listed(lens, c.name) and _listed(reference, c.name))
        for c in out
        if c.name not in excluded
    ]
    if grid.get("c3_by_depth"):
        _one_lens_cell_each(out, "c3_by_depth", "layers", "a depth of {} layers", "a depth")
    if grid.get("c3_by_width"):
        _one_lens_cell_each(out, "c3_by_width", "hidden_size", "a width of {}", "a width")
    return out


def scaling_cells(config):
    """`cells`, or [] without a scaling section."""
    return cells(config) if config.get("scaling") else []


def _one_lens_cell_each(grid_cells, study, axis, shared, each):
    """A study's cells, the lens cells, are told apart by one `axis` (a Cell attribute) alone: at least one, and
    one for each value of it."""
    by_value = {}
    for c in grid_cells:
        if c.lens:
            by_value.setdefault(getattr(c, axis), []).append(c.name)
    if not by_value:
        raise PipelineError(f"scaling.{study}: no cell has the tuned lens (scaling.lens), so there is no C3 to plot")
    for value, names in sorted(by_value.items()):
        if len(names) > 1:
            raise PipelineError(
                f"scaling.{study}: lens cells {', '.join(names)} share {shared.format(value)}; "
                f"give one lens cell {each} (scaling.lens)"
            )


def _steps(grid, size, key):
    """A size's steps, ascending: its own `steps`, else the shared scaling.steps."""
    own = "steps" in size
    steps = size["steps"] if own else grid.get("steps")
    if not steps:
        raise PipelineError(f"{key}: no steps; give scaling.steps or the size's own steps")
    for n in steps:
        if n < 1:
            raise PipelineError(f"{key + '.steps' if own else 'scaling.steps'}: {n} is not a positive number of steps")
    return sorted(set(steps))


def _cell_list(grid, key):
    """scaling.<key> as a set of cell names, None for all."""
    value = grid.get(key, "all")
    if isinstance(value, str):
        if value != "all":
            raise PipelineError(f"scaling.{key}: {value!r}; give all or a list of cell names")
        return None
    return set(value)


def _listed(cell_names, name):
    return cell_names is None or name in cell_names


def config_entries(grid_cells):
    """{"architectures": {cell: entry}, "pairs": {cell: entry}}: what the cells add to the config."""
    return {
        "architectures": {c.name: c.architecture() for c in grid_cells},
        "pairs": {c.name: c.pair() for c in grid_cells},
    }


def add_cells(config):
    """Add the cells' architectures and pairs (config_entries) to `config` in place; nothing without a
    scaling section. A cell's name the config already gives another entry is an error (an equal entry,
    from an earlier add_cells of the same config, is not)."""
    if not config.get("scaling"):
        return
    for key, entries in config_entries(cells(config)).items():
        present = config.setdefault(key, {})
        taken = sorted(name for name in entries if name in present and present[name] != entries[name])
        if taken:
            raise PipelineError(f"{key}: {', '.join(taken)} is a scaling cell's name; rename the entry")
        present.update(entries)


def _dims(grid, size, key):
    """hidden_size, layers, heads, intermediate_size of one `sizes` entry, checked to build a model."""
    hidden, layers = size["hidden_size"], size["layers"]
    heads = size.get("heads")
    if heads is None:
        head_dim = grid.get("head_dim", 64)
        if hidden % head_dim:
            raise PipelineError(
                f"{key}: hidden_size {hidden} is not a multiple of scaling.head_dim {head_dim}; name its heads"
            )
        heads = hidden // head_dim
    if hidden % heads or (hidden // heads) % 2:
        raise PipelineError(
            f"{key}: hidden_size {hidden} over {heads} heads is not an even head size (rotary "
            "embeddings rotate pairs of dimensions)"
        )
    intermediate = size.get("intermediate_size") or round(grid.get("mlp_ratio", 4) * hidden)
    if min(layers, intermediate) < 1:
        raise PipelineError(f"{key}: layers and intermediate_size must be positive")
    return {"hidden_size": hidden, "layers": layers, "heads": heads, "intermediate_size": intermediate}


def _variants(config, grid):
    """tied, untied, scaled of the grid, checked against `variants`' tied flags."""
    chosen = {
        "tied": grid.get("tied", "tied"),
        "untied": grid.get("untied", "untied"),
        "scaled": tuple(grid.get("scaled", ["tied_x5"])),
    }
    for role, names in (("tied", [chosen["tied"]]), ("untied", [chosen["untied"]]), ("scaled", chosen["scaled"])):
        for name in names:
            if name not in config["variants"]:
                raise PipelineError(
                    f"scaling.{role}: unknown variant {name!r} (variants: {', '.join(config['variants'])})"
                )
            if config["variants"][name]["tied"] != (role != "untied"):
                raise PipelineError(
                    f"scaling.{role}: variant {name!r} is not {'untied' if role == 'untied' else 'tied'}"
                )
    return chosen

"""A model reference: what a pair's `tied` or `untied` role (or a matched null run) names, one of three kinds.

- Trained {arch, variant}: a run this pipeline trains, one per seed, exported at its schedule's checkpoints;
- Hub {hub, revision}: a released checkpoint on the Hugging Face hub, fetched at its revision (embeddings only,
  or every weight);
- Local {path[, tokenizer]}: a directory save_pretrained wrote, read in place (its path absolute once the config
  is prepared: tying.plan.layers.local_paths), its tokenizer in its own directory or the `tokenizer` folder.

Configs hold references as plain mappings; `reference(mapping)` gives the typed one, which answers where the model
is at a seed and step, where a lens of it reads its tokens, its checkpoints over training (its evolution), the
hub revision it is pinned to and which kind it is. Its directories are path strings; the rule files expand rule
outputs over them.
"""

from dataclasses import dataclass, replace
from typing import ClassVar

from tying.plan.runs import schedule


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


@dataclass(frozen=True)
class Trained:
    """A run this pipeline trains: architecture `arch`, variant `variant` (a seed's run: its seed)."""

    arch: str
    variant: str
    trained: ClassVar[bool] = True
    hub: ClassVar[bool] = False
    local: ClassVar[bool] = False
    pin: ClassVar[None] = None  # no hub revision: the run is this build's

    @property
    def name(self):
        """The reference as text: arch/variant."""
        return f"{self.arch}/{self.variant}"

    def directory(self, seed, step, full=False):
        """Its checkpoint of `seed` at `step` (always whole)."""
        return checkpoint_dir(self.arch, self.variant, seed, step)

    def control(self, seed, step, matrix):
        """Its checkpoint's input or output `matrix` written as a tied model (a trained control's tied role)."""
        return trained_control_dir(self.arch, self.variant, seed, step, matrix)

    def tokens_source(self):
        """None: a lens of it reads the pipeline's tokens."""
        return None

    def schedule(self, config):
        """Its architecture's training schedule (tying.plan.runs.schedule)."""
        return schedule(config, self.arch)

    def evolution(self, config, seed, points=None):
        """{step: directory} of its checkpoints of `seed`, at every exported step in order."""
        return {s: self.directory(seed, s) for s in self.schedule(config).checkpoints}

    def as_variant(self, variant):
        """The run of the same architecture and seed in `variant` (an input-scaled or second untied variant)."""
        return replace(self, variant=variant)


@dataclass(frozen=True)
class Hub:
    """A released model on the Hugging Face hub: repository `repo` at `revision` (a branch, tag or commit)."""

    repo: str
    revision: str = "main"
    trained: ClassVar[bool] = False
    hub: ClassVar[bool] = True
    local: ClassVar[bool] = False

    @property
    def name(self):
        """The reference as text: repo@revision."""
        return f"{self.repo}@{self.revision}"

    @property
    def label(self):
        """What a figure title calls it: its repository."""
        return self.repo

    @property
    def pin(self):
        """(repository, revision) it is fetched at: pinned when the revision is a commit (tying.plan.pins)."""
        return self.repo, self.revision

    def directory(self, seed, step, full=False):
        """Its one fetched copy: only its embeddings, or (`full`) every weight."""
        return hub_dir(self.repo, self.revision, full)

    def at(self, revision):
        """The same repository at another revision (a checkpoint of its training)."""
        return replace(self, revision=revision)

    def control(self, seed, step, matrix):
        """Its input or output `matrix` written as a tied model (a survey control's tied role)."""
        return control_dir(self.repo, self.revision, matrix)

    def tokens_source(self):
        """{repo, revision}: a lens of it reads the corpus in its own tokenizer (the hub_tokens rule)."""
        return {"repo": self.repo, "revision": self.revision}

    def schedule(self, config):
        """The shared train.* schedule: a released model has none of its own."""
        return schedule(config)

    def evolution(self, config, seed, points):
        """{step: directory} of its checkpoints: `points` maps a step to the revision holding it."""
        return {int(s): self.at(points[s]).directory(seed, s) for s in sorted(points, key=int)}


@dataclass(frozen=True)
class Local:
    """A directory save_pretrained wrote, `path`, with its tokenizer there or in the `tokenizer` folder."""

    path: str
    tokenizer: str = None
    trained: ClassVar[bool] = False
    hub: ClassVar[bool] = False
    local: ClassVar[bool] = True
    pin: ClassVar[None] = None  # no hub revision: the directory is the user's

    @property
    def name(self):
        """The reference as text: its path."""
        return self.path

    @property
    def label(self):
        """What a figure title calls it: its directory's name."""
        return self.path.rstrip("/").rsplit("/", 1)[-1]

    @property
    def tokenizer_dir(self):
        """The folder holding its tokenizer: its `tokenizer` folder, else its own directory."""
        return self.tokenizer or self.path

    def directory(self, seed, step, full=False):
        """Itself, whole."""
        return self.path

    def tokens_source(self):
        """{dir}: a lens of it reads the corpus in its own tokenizer, tokenizer_dir absolute without the leading /
        (the wildcard of results/local/tokens/{dir}), so the models of one tokenizer share the job."""
        return {"dir": self.tokenizer_dir.lstrip("/")}

    def schedule(self, config):
        """The shared train.* schedule: a local model has none of its own."""
        return schedule(config)

    def evolution(self, config, seed, points):
        """{step: directory} of its checkpoints: `points` maps a step to the directory holding it."""
        return {int(s): points[s] for s in sorted(points, key=int)}


def reference(ref):
    """The typed reference of a config's mapping: Trained ({arch, variant}), Local ({path, ...}) or Hub."""
    if "arch" in ref:
        return Trained(ref["arch"], ref["variant"])
    if "path" in ref:
        return Local(ref["path"], ref.get("tokenizer"))
    return Hub(ref["hub"], ref.get("revision") or "main")

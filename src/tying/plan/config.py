"""The one way in: the config a build of this checkout runs, layered (tying.plan.layers), typed, checked
(tying.plan.schema, tying.plan.checks) and with the scaling grid's cells added as pairs (tying.plan.grid). The
Snakefile calls `prepared`; so do scripts and tests that need a config as a build sees it."""

from pathlib import Path
from typing import NamedTuple

from tying.plan.checks import check
from tying.plan.grid import add_cells
from tying.plan.layers import CHECKOUT, layered, local_paths, typed_overrides
from tying.plan.schema import check_schema

SCHEMA = CHECKOUT / "workflow" / "schemas" / "config.schema.yaml"


class Prepared(NamedTuple):
    """A checked config, and the lines its check found worth saying once a run (the token strings each pair of
    local models shares)."""

    config: dict
    lines: list


def prepared(*configfiles, overrides=None, launch_dir=None, replace=False, passed=None):
    """The config a build of this checkout runs -> Prepared: config.yaml (none when `replace`), then each of
    `configfiles` (relative to `launch_dir`, default this checkout), then the `--config` `overrides`; or
    config.yaml then a config `passed` as a mapping, the one overlay (used as a module, the using workflow's
    config; with `replace`, a whole config). Local paths made absolute against `launch_dir`; the `overrides`' text
    read as YAML; the schema's defaults filled in, the scaling grid's cells added as pairs and every check passed
    (PipelineError otherwise)."""
    base = Path(launch_dir or CHECKOUT)
    files = [] if passed is not None else [base / f for f in configfiles]
    config = layered(CHECKOUT / "config.yaml", files, overrides if passed is None else passed, replace)
    local_paths(config, str(base))
    typed_overrides(config, overrides or {})  # --config "lens={steps: 30}": 30, not '30'
    check_schema(config, SCHEMA)  # before add_cells reads it
    add_cells(config)
    return Prepared(config, check(config, SCHEMA))

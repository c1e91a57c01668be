"""A lens folder as tuned-lens 0.2 saves one (`config.json`, `params.pt`), its config read without torch: the
config check reads it before any job (tying.plan.checks); the lens job reads the translators
(tying.lens.tuned_lens_format)."""

import json
from pathlib import Path

from tying.errors import PipelineError

CONFIG, PARAMS = "config.json", "params.pt"
LENS_TYPE = "linear_tuned_lens"


def read_lens_config(path):
    """A tuned-lens folder's config.json as a dict, checked to be a linear tuned lens with an integer
    d_model and num_hidden_layers, beside a params.pt."""
    path = Path(path)
    if not path.is_dir():
        raise PipelineError(f"{path}: no such lens folder")
    for name in (CONFIG, PARAMS):
        if not (path / name).is_file():
            raise PipelineError(f"{path}: not a tuned-lens folder (no {name})")
    try:
        config = json.loads((path / CONFIG).read_text())
    except ValueError as error:
        raise PipelineError(f"{path / CONFIG}: not JSON ({error})") from None
    missing = [key for key in ("d_model", "num_hidden_layers") if not isinstance(config.get(key), int)]
    if missing:
        raise PipelineError(f"{path / CONFIG}: no integer {' or '.join(missing)}")
    if config.get("lens_type", LENS_TYPE) != LENS_TYPE:
        raise PipelineError(f"{path}: lens_type {config['lens_type']!r}; only {LENS_TYPE!r} lenses are read")
    return config

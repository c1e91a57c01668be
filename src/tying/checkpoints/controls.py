"""Controls: one matrix of an untied model written as a tied model, so the alignment and KNN metrics
read it like any pair's tied role (`control: input`, `output` or `mixture` in a config's pairs).

A module of its own so that a control job imports what it writes with (torch, safetensors), not the
survey's tables and statistics."""

import json
from pathlib import Path

from safetensors.torch import save_file

from tying.checkpoints.embeddings import load_embeddings
from tying.checkpoints.layouts import LAYOUTS
from tying.errors import PipelineError
from tying.io import atomic_path

CONTROLS = {"input": "control: input", "output": "control: output", "mixture": "control: mixture"}


def control_matrix(embeddings, matrix):
    """A control's tied role from an untied model's Embeddings: its input or output matrix, or the mixture,
    the row-normalised mean (in_i / |in_i| + out_i / |out_i|) / 2 of the two (half input-like, half
    output-like by construction: the zero point a tied gap is calibrated against)."""
    if matrix == "mixture":
        unit = [m / m.norm(dim=1, keepdim=True).clamp_min(1e-12) for m in (embeddings.input, embeddings.output)]
        return (unit[0] + unit[1]) / 2
    return embeddings.input if matrix == "input" else embeddings.output


def control_model(source_dir, matrix, dest):
    """Write the `matrix` ("input", "output" or "mixture": control_matrix) of the untied model in `source_dir`
    as a tied model in `dest`.

    dest holds the source's config.json with tie_word_embeddings true, its tokenizer.json, and a
    model.safetensors whose only tensor is that matrix (float32, the tokenizer's rows) under the
    first layout's input-embedding name. Atomic: dest appears whole or not at all.
    """
    source_dir = Path(source_dir)
    if matrix not in CONTROLS:
        raise PipelineError(f"control matrix {matrix!r}: choose from {', '.join(CONTROLS)}")
    embeddings = load_embeddings(source_dir)
    if embeddings.tied:
        raise PipelineError(f"{source_dir}: a control needs an untied model, and this one is tied")
    config = json.loads((source_dir / "config.json").read_text())
    with atomic_path(dest) as tmp:
        tmp.mkdir()
        (tmp / "config.json").write_text(json.dumps({**config, "tie_word_embeddings": True}, indent=2) + "\n")
        (tmp / "tokenizer.json").write_bytes((source_dir / "tokenizer.json").read_bytes())
        save_file({LAYOUTS[0][0]: control_matrix(embeddings, matrix).contiguous()}, tmp / "model.safetensors")

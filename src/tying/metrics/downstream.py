"""Table 7's downstream perplexity of a trained checkpoint on a held-out text (the paper: WikiText-2).

Tidy rows (metric, value); the metric names are the Table 7 column headers. The zero-shot
accuracies are in tying.metrics.zero_shot.
"""

import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from transformers import AutoTokenizer

from tying.data.corpus import hf_documents, local_documents
from tying.errors import PipelineError
from tying.io import atomic_path
from tying.train.models import frozen_model


def text_documents(cfg):
    """Documents of the `downstream.perplexity` config section (source hf or local), each stripped."""
    if cfg["source"] == "local":
        return local_documents(cfg["paths"], cfg.get("text_field", "text"))
    return hf_documents(
        cfg["path"],
        cfg.get("name"),
        cfg.get("split", "test"),
        cfg.get("revision"),
        cfg.get("text_field", "text"),
        max_tokens=math.inf,
    )


def write_text(documents, path):
    """The documents joined by a blank line, as one UTF-8 text file (atomically)."""
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as out:
        for i, (_, text) in enumerate(documents):
            out.write(("\n\n" if i else "") + text)


@torch.no_grad()
def perplexity(model, ids, seq_len, batch_size=8):
    """Token-level perplexity of `ids` (1-D ints) in consecutive non-overlapping windows of `seq_len`:
    every token but a window's first is predicted from the tokens before it in its window.

    Returns (perplexity, number of predicted tokens).
    """
    ids = torch.as_tensor(np.asarray(ids, dtype=np.int64))
    if len(ids) < 2:
        raise PipelineError(f"perplexity needs at least 2 tokens, got {len(ids)}")
    device = next(model.parameters()).device
    windows = list(ids.split(seq_len))
    full, last = (windows, []) if len(windows[-1]) == seq_len else (windows[:-1], windows[-1:])
    total, count = 0.0, 0
    for group in [full[i : i + batch_size] for i in range(0, len(full), batch_size)] + [last]:
        if not group or group[0].numel() < 2:
            continue
        x = torch.stack(group).to(device)
        logits = model(input_ids=x).logits[:, :-1].float()
        total += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1), reduction="sum").item()
        count += x[:, 1:].numel()
    return math.exp(total / count), count


def text_perplexity(model_dir, text_path, label, *, seq_len, batch_size, device="cpu", dtype="float32"):
    """Rows (metric, value) for the perplexity of the checkpoint `model_dir` on the text file."""
    model = frozen_model(model_dir, device=device, dtype=dtype)
    tok = AutoTokenizer.from_pretrained(model_dir)
    ids = tok(Path(text_path).read_text(encoding="utf-8"), add_special_tokens=False)["input_ids"]
    value, count = perplexity(model, ids, seq_len, batch_size)
    print(f"perplexity: {label} {value:.3f} over {count:,} predicted tokens", file=sys.stderr, flush=True)
    return pd.DataFrame([{"metric": f"{label} perplexity", "value": value}])

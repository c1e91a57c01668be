"""Model quality of a local pair's models: the claims table's LM row for models the pipeline did not train.

Each model's validation loss, its own logits' next-token cross-entropy, on the corpus's validation split in its
own tokenizer (the windows its lens is scored on), beside the unigram and bigram tables of the training split in
that tokenizer (tying.metrics.baselines.corpus_baselines) on the same targets: its training data is not here,
so the tables count the corpus the pipeline has, every training window once. The rows are
tying.metrics.model_quality's, at step 0, so the LM claim reads them as a trained pair's.
"""

import json
import math

import torch
import torch.nn.functional as F

from tying.data.batches import eval_batches
from tying.data.tokens import load_ids
from tying.metrics.baselines import corpus_baselines
from tying.metrics.model_quality import COLUMNS
from tying.train.models import frozen_model


@torch.no_grad()
def validation_loss(model, batches):
    """Mean next-token cross-entropy (nats) of `model`'s own logits over `batches` [(inputs, targets)]."""
    total, count = 0.0, 0
    for inputs, targets in batches:
        logits = model(input_ids=inputs.to(model.device), use_cache=False).logits.float()
        total += F.cross_entropy(logits.flatten(0, 1), targets.to(model.device).flatten(), reduction="sum").item()
        count += targets.numel()
    return total / count


def local_quality_frame(role, model_dir, files, cfg, *, device="cpu", dtype="float32"):
    """One row of model_quality's COLUMNS for the local model in `model_dir` in its pair's `role`: arch its
    directory, variant "local", step 0. files: its token arrays' train, val and meta paths; cfg: the config's
    `lens:` section, whose seq_len, batch_size and eval_batches (null: every window) are the windows scored."""
    train, val = load_ids(files["train"], files["meta"]), load_ids(files["val"], files["meta"])
    vocab = json.loads(open(files["meta"]).read())["vocab_size"]
    batch_size, seq_len = cfg["batch_size"], cfg["seq_len"]
    n_batches = cfg.get("eval_batches") or math.ceil((len(val) - 1) // seq_len / batch_size)
    tables = corpus_baselines(train, val, vocab, n_batches, batch_size, seq_len)
    loss = validation_loss(
        frozen_model(model_dir, device=device, dtype=dtype), eval_batches(val, n_batches, batch_size, seq_len)
    )
    return tables.assign(
        role=role, arch=str(model_dir), variant="local", val_loss=loss, margin=loss - tables["bigram_loss"]
    )[COLUMNS]

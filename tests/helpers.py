"""What only the tests need from the package's building blocks: a corpus read whole, in-memory
tokenization, raw id arrays, the tying check on a model, the paper's gradient-flow summary; and a local
lm-eval task, for the tests that need lm-eval installed."""

import importlib.util
import json

import pandas as pd
import pytest
import torch.nn.functional as F

from tying.data.corpus import split_of
from tying.data.shards import shard_documents
from tying.data.tokens import dtype_for, tokenize_batches
from tying.errors import PipelineError
from tying.io import atomic_path


def build_corpus(corpus):
    """The `corpus` config section's source read whole (one shard) into memory: DataFrame doc_id, text, split."""
    frame = pd.DataFrame(list(shard_documents({**corpus, "shards": 1}, 0)), columns=["doc_id", "text"])
    if frame.empty:
        raise PipelineError(f"corpus source {corpus['source']!r} produced no documents")
    frame["split"] = [split_of(d, corpus.get("val_fraction", 0.05)) for d in frame["doc_id"]]
    if not (frame["split"] == "val").any() or not (frame["split"] == "train").any():
        raise PipelineError(
            f"corpus of {len(frame)} documents is too small to split at val_fraction "
            f"{corpus.get('val_fraction', 0.05)}"
        )
    return frame


def tokenize_corpus(documents, tok, out_train, out_val, out_meta, out_counts):
    """Tokenize a documents DataFrame (doc_id, text, split) held in memory."""
    tokenize_batches([documents], tok, out_train, out_val, out_meta, out_counts)


def write_ids(ids, path, vocab_size):
    """Write ids as a raw array of dtype_for(vocab_size), atomically."""
    with atomic_path(path) as tmp:
        ids.astype(dtype_for(vocab_size)).tofile(tmp)


def is_tied(model):
    """True when input embedding and output projection are one tensor."""
    return model.get_input_embeddings().weight is model.get_output_embeddings().weight


def grad_flow_summary(frame):
    """Mean output share and mean / median ratio g_out / g_in of a grad_flow_frame.

    Paper, first 1000 steps: output 70-83% of the total, mean ratio 6.2, median 4.3.
    Returns {"mean_out_share", "mean_ratio", "median_ratio"} as floats.
    """
    ratio = frame["g_out"] / frame["g_in"]
    return {
        "mean_out_share": float(frame["out_share"].mean()),
        "mean_ratio": float(ratio.mean()),
        "median_ratio": float(ratio.median()),
    }


def lm_loss(logits, targets):
    """Mean next-token cross-entropy in nats from whole logits: the plain path the fused
    tying.train.cross_entropy is checked against."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1))


HAS_LM_EVAL = importlib.util.find_spec("lm_eval") is not None
needs_lm_eval = pytest.mark.skipif(
    not HAS_LM_EVAL,
    reason="lm-eval is not installed (the `eval` extra: pip install -c constraints.txt -e '.[eval]')",
)


TASK = """
task: tiny_choice
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{question}}}}"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: "{{{{answer}}}}"
metric_list:
  - metric: acc
"""


def write_task(folder, n=12):
    """A local lm-eval multiple-choice task over the word tokenizer's vocabulary; its folder."""
    docs = [
        {
            "question": f"t{1 + i % 7} t{2 + i % 5} t{3 + i % 3}",
            "choices": [f"t{10 + i % 4}", f"t{20 + i % 6} t5", "t9"],
            "answer": i % 3,
        }
        for i in range(n)
    ]
    (folder / "tiny.jsonl").write_text("\n".join(json.dumps(d) for d in docs) + "\n")
    (folder / "tiny_choice.yaml").write_text(TASK.format(data=folder / "tiny.jsonl"))
    return docs

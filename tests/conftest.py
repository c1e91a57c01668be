import numpy as np
import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from tying.train.models import build_model, model_config


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


def tiny_model(family="olmo", tied=True, vocab_size=64, hidden_size=16, seed=0):
    """A two-layer model small enough for exact gradient checks."""
    config = model_config(
        family, vocab_size=vocab_size, hidden_size=hidden_size, layers=2, heads=2, seq_len=16, tied=tied, eos_id=0
    )
    return build_model(config, seed)


def markov_tokens(n, vocab_size, seed=0):
    """A token stream with learnable structure: each token mostly follows from the previous one."""
    rng = np.random.default_rng(seed)
    nxt = rng.integers(0, vocab_size, size=vocab_size)
    ids = np.empty(n, dtype=np.uint16)
    ids[0] = 1
    noise = rng.random(n) < 0.2
    rand = rng.integers(0, vocab_size, size=n)
    for i in range(1, n):
        ids[i] = rand[i] if noise[i] else nxt[ids[i - 1]]
    return ids


def word_tokenizer(vocab_size):
    """A word-level fast tokenizer over 't0' ... 't{vocab_size-1}'; 't0' is end of text."""
    tok = Tokenizer(models.WordLevel({f"t{i}": i for i in range(vocab_size)}, unk_token="t0"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="t0")

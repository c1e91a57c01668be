"""A fake Hugging Face hub cache of tiny random models in the layouts the paper uses, and configs/paper.yaml in
miniature over them.

The cache is laid out as huggingface_hub lays it out:
models--{org}--{name}/{blobs/<sha256>, snapshots/<commit>/<file> -> ../../blobs/<sha256>, refs/<revision>}.
"""

import copy
import hashlib
import json
import os
import re
import tempfile
import threading
from collections import Counter
from contextlib import contextmanager
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

import torch
from huggingface_hub import constants
from safetensors.torch import load_file
from tokenizers import ByteLevelBPETokenizer, Tokenizer, models, pre_tokenizers
from transformers import (
    GPTNeoConfig,
    GPTNeoForCausalLM,
    GPTNeoXConfig,
    GPTNeoXForCausalLM,
    OlmoConfig,
    OlmoForCausalLM,
    PreTrainedTokenizerFast,
    Qwen3Config,
    Qwen3ForCausalLM,
)

from tying.checkpoints.layouts import LAYOUTS
from tying.plan.layers import load

VOCAB = 64
SMALL = {"vocab_size": VOCAB, "max_position_embeddings": 64, "bos_token_id": 0, "eos_token_id": 0, "pad_token_id": 0}


def _olmo(seed, tied=False):
    # Wide MLP: the embeddings are a small minority of the weights.
    config = OlmoConfig(
        **SMALL,
        hidden_size=32,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        tie_word_embeddings=tied,
    )
    return _seeded(OlmoForCausalLM, config, seed)


def _pythia(seed):
    config = GPTNeoXConfig(
        **SMALL,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        tie_word_embeddings=False,
    )
    return _seeded(GPTNeoXForCausalLM, config, seed)


def _gpt_neo(seed):
    config = GPTNeoConfig(
        **SMALL,
        hidden_size=32,
        num_layers=2,
        num_heads=4,
        attention_types=[[["global", "local"], 1]],
        window_size=16,
        tie_word_embeddings=True,
    )
    return _seeded(GPTNeoForCausalLM, config, seed)


def _qwen3(hidden, tied, seed):
    config = Qwen3Config(
        **SMALL,
        hidden_size=hidden,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=hidden // 4,
        tie_word_embeddings=tied,
    )
    return _seeded(Qwen3ForCausalLM, config, seed)


def _seeded(model_class, config, seed):
    torch.manual_seed(seed)
    return model_class(config)


# repo id -> {revision: (build(seed) -> model, seed, save_pretrained kwargs)}
REPOS = {
    "test-org/olmo-untied": {
        "step0": (_olmo, 0, {}),
        "step1000": (_olmo, 1, {}),
    },
    "test-org/olmo-tied": {"main": (lambda seed: _olmo(seed, tied=True), 6, {})},
    "test-org/pythia": {"main": (_pythia, 2, {})},
    "test-org/gpt-neo": {"main": (_gpt_neo, 3, {})},
    "test-org/qwen3-tied": {"main": (lambda seed: _qwen3(32, True, seed), 4, {})},
    "test-org/qwen3-untied-sharded": {
        "main": (lambda seed: _qwen3(48, False, seed).to(torch.bfloat16), 5, {"max_shard_size": "20KB"}),
    },
}


def word_tokenizer(words):
    """A word-level fast tokenizer whose token i is words[i]; words[0] is the unknown and end-of-text token."""
    tokenizer = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token=words[0]))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token=words[0], eos_token=words[0])


def tiny_tokenizer():
    """A word-level fast tokenizer over VOCAB tokens ('[UNK]', 't1', ...); '[UNK]' (id 0) doubles as
    end of text, as the models' eos_token_id says."""
    return word_tokenizer(["[UNK]", *(f"t{i}" for i in range(1, VOCAB))])


def add_snapshot(cache_dir, repo_id, revision, model_dir):
    """Store the files of `model_dir` in the hub cache as `repo_id` at `revision`; returns the commit hash."""
    repo = Path(cache_dir) / f"models--{repo_id.replace('/', '--')}"
    files = sorted(path for path in Path(model_dir).iterdir() if path.is_file())
    digests = {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in files}
    commit = hashlib.sha1(f"{repo_id}@{revision}:{sorted(digests.items())}".encode()).hexdigest()
    (repo / "blobs").mkdir(parents=True, exist_ok=True)
    (repo / "snapshots" / commit).mkdir(parents=True, exist_ok=True)
    for path in files:
        blob = repo / "blobs" / digests[path.name]
        blob.write_bytes(path.read_bytes())
        os.symlink(f"../../blobs/{digests[path.name]}", repo / "snapshots" / commit / path.name)
    set_ref(cache_dir, repo_id, revision, commit)
    return commit


def set_ref(cache_dir, repo_id, revision, commit):
    """Point `revision` of `repo_id` at `commit` in the hub cache."""
    ref = Path(cache_dir) / f"models--{repo_id.replace('/', '--')}" / "refs" / revision
    ref.parent.mkdir(parents=True, exist_ok=True)
    ref.write_text(commit)


def build_hub_cache(cache_dir):
    """Fill `cache_dir` with the REPOS, each with a tokenizer; returns {repo_id: {revision: commit}}.

    "main" of test-org/olmo-untied points at the same commit as its "step1000".
    """
    commits = {}
    tokenizer = tiny_tokenizer()
    for repo_id, revisions in REPOS.items():
        for revision, (build, seed, save_kwargs) in revisions.items():
            with tempfile.TemporaryDirectory() as model_dir:
                build(seed).save_pretrained(model_dir, **save_kwargs)
                tokenizer.save_pretrained(model_dir)
                commits.setdefault(repo_id, {})[revision] = add_snapshot(cache_dir, repo_id, revision, model_dir)
    set_ref(cache_dir, "test-org/olmo-untied", "main", commits["test-org/olmo-untied"]["step1000"])
    commits["test-org/olmo-untied"]["main"] = commits["test-org/olmo-untied"]["step1000"]
    return commits


def add_vocab_files_repo(cache_dir, repo_id="test-org/gpt-neo-vocab-files"):
    """Store a tied GPT-Neo whose tokenizer is only vocab.json + merges.txt, no tokenizer.json (as
    EleutherAI/gpt-neo-2.7B ships it), as `repo_id` at "main"; returns the commit hash."""
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(
        ["the cat sat on the mat"] * 50, vocab_size=300, special_tokens=["<|endoftext|>"], show_progress=False
    )
    config = GPTNeoConfig(
        **{**SMALL, "vocab_size": bpe.get_vocab_size()},
        hidden_size=32,
        num_layers=2,
        num_heads=4,
        attention_types=[[["global", "local"], 1]],
        window_size=16,
    )
    with tempfile.TemporaryDirectory() as model_dir:
        _seeded(GPTNeoForCausalLM, config, 7).save_pretrained(model_dir)
        bpe.save_model(model_dir)
        return add_snapshot(cache_dir, repo_id, "main", model_dir)


# .bin-only repos, as Pythia's step branches and GPT-Neo-2.7B ship: repo id -> (build(seed) -> model,
# seed, number of pytorch_model*.bin files, torch's zip serialization (else the legacy one)), at "main".
BIN_REPOS = {
    "test-org/gpt-neo-bin": (_gpt_neo, 8, 1, False),
    "test-org/pythia-bin": (lambda seed: _pythia(seed).half(), 10, 1, True),
    "test-org/pythia-bin-sharded": (lambda seed: _pythia(seed).half(), 9, 3, True),
}


def bin_checkpoint(repo_id):
    """(model, the state dict stored for it) of BIN_REPOS[repo_id], under the names save_pretrained writes
    (Pythia's embed_out.weight), input embedding first and output matrix last: a tied model's output
    matrix is the very tensor of its input one, and a GPT-NeoX keeps the causal-mask buffers older
    transformers saved, after the weights."""
    build, seed, _, _ = BIN_REPOS[repo_id]
    model = build(seed)
    with tempfile.TemporaryDirectory() as model_dir:
        model.save_pretrained(model_dir)
        stored = load_file(Path(model_dir) / "model.safetensors")
    place = {name: position for layout in LAYOUTS for position, name in enumerate(layout)}
    state = dict(sorted(stored.items(), key=lambda item: {0: -1, 1: 1}.get(place.get(item[0]), 0)))
    if model.config.tie_word_embeddings:
        state["lm_head.weight"] = state["transformer.wte.weight"]
    if isinstance(model, GPTNeoXForCausalLM):
        n = model.config.max_position_embeddings
        for i in range(model.config.num_hidden_layers):
            state[f"gpt_neox.layers.{i}.attention.bias"] = torch.ones(n, n, dtype=torch.bool).tril().view(1, 1, n, n)
            state[f"gpt_neox.layers.{i}.attention.masked_bias"] = torch.tensor(-1e9)
    return model, state


def add_bin_repos(cache_dir):
    """Store the BIN_REPOS with their tokenizer and only torch.save'd weights: pytorch_model.bin (zip or
    legacy serialization), or pytorch_model-0000k-of-0000n.bin shards (tensors in state-dict order) and
    pytorch_model.bin.index.json. Returns {repo_id: commit}."""
    commits = {}
    for repo_id, (_, _, shards, zip_format) in BIN_REPOS.items():
        model, state = bin_checkpoint(repo_id)
        with tempfile.TemporaryDirectory() as model_dir:
            model.config.save_pretrained(model_dir)
            tiny_tokenizer().save_pretrained(model_dir)
            if shards == 1:
                torch.save(state, Path(model_dir) / "pytorch_model.bin", _use_new_zipfile_serialization=zip_format)
            else:
                names = list(state)
                weight_map = {}
                for k in range(shards):
                    shard = f"pytorch_model-{k + 1:05d}-of-{shards:05d}.bin"
                    group = names[round(k * len(names) / shards) : round((k + 1) * len(names) / shards)]
                    torch.save({name: state[name] for name in group}, Path(model_dir) / shard)
                    weight_map.update(dict.fromkeys(group, shard))
                index = {"metadata": {"total_size": sum(t.nbytes for t in state.values())}, "weight_map": weight_map}
                (Path(model_dir) / "pytorch_model.bin.index.json").write_text(json.dumps(index, indent=2))
            commits[repo_id] = add_snapshot(cache_dir, repo_id, "main", model_dir)
    return commits


def snapshot_dir(cache_dir, repo_id, commit):
    """The folder of `repo_id` at `commit` in the hub cache."""
    return Path(cache_dir) / f"models--{repo_id.replace('/', '--')}" / "snapshots" / commit


def use_hub_cache(monkeypatch, cache_dir):
    """Work offline from the hub cache `cache_dir`, in this process and in its subprocesses."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(cache_dir))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache_dir))


def use_hub_server(monkeypatch, endpoint, empty_cache_dir):
    """Work online against the hub at `endpoint`, with an empty hub cache."""
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(empty_cache_dir))
    monkeypatch.setattr(constants, "ENDPOINT", endpoint)
    monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", endpoint + "/{repo_id}/resolve/{revision}/{filename}")


@contextmanager
def serve_hub(cache_dir):
    """Serve the hub cache over HTTP on 127.0.0.1 as a minimal hub (the API routes huggingface_hub's
    HfApi and HfFileSystem use, and ranged file downloads). Yields (endpoint, bytes of files sent)."""
    sent = Counter()
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_HubHandler, Path(cache_dir), sent))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", sent
    finally:
        server.shutdown()
        server.server_close()


class _HubHandler(BaseHTTPRequestHandler):
    def __init__(self, cache_dir, sent, *args, **kwargs):
        self.cache_dir, self.sent = cache_dir, sent
        super().__init__(*args, **kwargs)

    def log_message(self, *args):
        pass

    def do_GET(self):
        self._route(send_body=True)

    def do_HEAD(self):
        self._route(send_body=False)

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self._route(send_body=True)

    def _route(self, send_body):
        path = unquote(urlsplit(self.path).path)
        api = re.fullmatch(r"/api/models/([^/]+/[^/]+)/(revision|tree|paths-info)/([^/]+)(?:/.*)?", path)
        resolve = re.fullmatch(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path)
        repo_id, revision = (api.group(1), api.group(3)) if api else resolve.groups()[:2] if resolve else (None, None)
        commit = repo_id and self._commit(repo_id, revision)
        if commit is None:
            return self._send(404, b"{}", {"X-Error-Code": "RevisionNotFound"}, send_body)
        folder = snapshot_dir(self.cache_dir, repo_id, commit)
        if resolve:
            return self._send_file(folder / resolve.group(3), commit, send_body)
        if api.group(2) == "revision":
            siblings = [{"rfilename": p.name} for p in sorted(folder.iterdir())]
            return self._send_json({"id": repo_id, "sha": commit, "siblings": siblings}, send_body)
        entries = [
            {"type": "file", "path": p.name, "size": p.stat().st_size, "oid": commit} for p in sorted(folder.iterdir())
        ]
        return self._send_json(entries, send_body)

    def _commit(self, repo_id, revision):
        repo = Path(self.cache_dir) / f"models--{repo_id.replace('/', '--')}"
        ref = repo / "refs" / revision
        if ref.is_file():
            return ref.read_text()
        return revision if (repo / "snapshots" / revision).is_dir() else None

    def _send_file(self, path, commit, send_body):
        data = path.read_bytes()
        headers = {"ETag": f'"{commit}-{path.name}"', "X-Repo-Commit": commit, "Accept-Ranges": "bytes"}
        status, body = 200, data
        ranged = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        if ranged:
            start = int(ranged.group(1))
            end = int(ranged.group(2)) + 1 if ranged.group(2) else len(data)
            status, body = 206, data[start:end]
            headers["Content-Range"] = f"bytes {start}-{start + len(body) - 1}/{len(data)}"
        if send_body:
            self.sent[path.name] += len(body)
        self._send(status, body, headers, send_body)

    def _send_json(self, payload, send_body):
        self._send(200, json.dumps(payload).encode(), {"Content-Type": "application/json"}, send_body)

    def _send(self, status, body, headers, send_body):
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if send_body:
            self.wfile.write(body)


# --- The survey's fake hub: planted structure, negative controls, every layout it reads ----------------------
SURVEY_VOCAB = 400
SURVEY_NOISE = 0.5  # planted matrices are a linear image of their source plus this much Gaussian noise per entry


def _survey_olmo(words, hidden, tied, input_matrix, output_matrix=None):
    """A one-layer OLMo over `words` whose embedding (and, untied, output) rows are the given matrices."""
    config = OlmoConfig(
        vocab_size=len(words),
        hidden_size=hidden,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        max_position_embeddings=32,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
        tie_word_embeddings=tied,
    )
    model = _seeded(OlmoForCausalLM, config, 0)
    with torch.no_grad():
        model.model.embed_tokens.weight.copy_(input_matrix)
        if not tied:
            model.lm_head.weight.copy_(output_matrix)
    return model


def build_survey_cache(cache_dir):
    """A hub cache for the survey at "main": returns {repo_id: commit}.

    test-org/survey-untied: untied (input U_in, output U_out, d = 16).
    test-org/survey-tied: tied, d = 24, matrix = U_out A + noise (the planted claim); no lm_head tensor.
    test-org/survey-sibling: untied, sharded safetensors, input U_in + noise and output U_out + noise (the
    negative controls: its input matrix as "tied" must not look like an output matrix).
    test-org/survey-tied-other-tokenizer: tied, d = 24, a different tokenizer holding 300 of the 400 token
    strings (in another order): those rows are U_out A' + noise, the other 100 random.
    """
    g = torch.Generator().manual_seed(11)
    words = ["[UNK]", *(f"w{i}" for i in range(1, SURVEY_VOCAB))]
    u_in, u_out = torch.randn(SURVEY_VOCAB, 16, generator=g), torch.randn(SURVEY_VOCAB, 16, generator=g)

    def noisy(x, width):
        return x @ torch.randn(16, width, generator=g) / 4 + SURVEY_NOISE * torch.randn(len(x), width, generator=g)

    shared = torch.randperm(SURVEY_VOCAB, generator=g)[:300].sort().values
    other_words = ["[UNK]", *(words[i] for i in reversed(shared.tolist()) if i), *(f"x{i}" for i in range(100))]
    other = torch.randn(len(other_words), 24, generator=g)
    rows = [other_words.index(words[i]) for i in shared.tolist()]
    other[rows] = noisy(u_out[shared], 24)
    repos = {
        "test-org/survey-untied": (words, _survey_olmo(words, 16, False, u_in, u_out), {}),
        "test-org/survey-tied": (words, _survey_olmo(words, 24, True, noisy(u_out, 24)), {}),
        "test-org/survey-sibling": (
            words,
            _survey_olmo(
                words,
                16,
                False,
                u_in + SURVEY_NOISE * torch.randn(SURVEY_VOCAB, 16, generator=g),
                u_out + SURVEY_NOISE * torch.randn(SURVEY_VOCAB, 16, generator=g),
            ),
            {"max_shard_size": "20KB"},
        ),
        "test-org/survey-tied-other-tokenizer": (other_words, _survey_olmo(other_words, 24, True, other), {}),
    }
    commits = {}
    for repo_id, (vocab, model, save_kwargs) in repos.items():
        with tempfile.TemporaryDirectory() as model_dir:
            model.save_pretrained(model_dir, **save_kwargs)
            word_tokenizer(vocab).save_pretrained(model_dir)
            commits[repo_id] = add_snapshot(cache_dir, repo_id, "main", model_dir)
    return commits


PAPER = load("configs/paper.yaml")

# configs/paper.yaml in miniature: the same pairs and targets over the fake repos, a local corpus, a tiny lens.
FAKE_PAIRS = {
    "main": {
        "tied": {"hub": "test-org/olmo-tied", "revision": "main"},
        "untied": {"hub": "test-org/olmo-untied", "revision": "main"},
        "evolution": {0: "step0", 1000: "step1000"},
    },
    "family": {"tied": {"hub": "test-org/gpt-neo"}, "untied": {"hub": "test-org/pythia"}},
    "scale": {"tied": {"hub": "test-org/qwen3-tied"}, "untied": {"hub": "test-org/qwen3-untied-sharded"}},
}


def fake_paper_config(corpus_path, **analysis):
    return {
        **{k: PAPER[k] for k in ("seeds", "tokenizer", "model", "train", "variants", "architectures")},
        "corpus": {"source": "local", "paths": [str(corpus_path)], "val_fraction": 0.25},
        "pairs": copy.deepcopy(FAKE_PAIRS),  # callers may change a pair; FAKE_PAIRS stays as it is
        "figures": {"fig1": "main", "fig2": "main", "fig3": "main"},
        "tables": {"table1": ["main", "family"], "table5": ["main", "scale", "family"], "claims": "main"},
        "analysis": {"knn_k": 5, **analysis},
        "lens": {"steps": 3, "batch_size": 2, "seq_len": 16, "eval_batches": 2},
    }

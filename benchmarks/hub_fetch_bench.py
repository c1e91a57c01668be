"""Embedding-only versus full fetch over HTTP, served from a loopback fake hub: a model shaped like
OLMo-1B-0724 (untied, embeddings ~17% of the weights, safetensors) and one shaped like a Pythia-1B
step branch (untied float16, only a torch zip pytorch_model.bin). Prints bytes and seconds.

Run: .venv/bin/python benchmarks/hub_fetch_bench.py [--record [NOTE]]   (--record: append to benchmarks/records.csv)
"""

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import records  # noqa: E402
import torch  # noqa: E402
from hubfixtures import add_snapshot, serve_hub  # noqa: E402
from huggingface_hub import constants  # noqa: E402
from transformers import GPTNeoXConfig, GPTNeoXForCausalLM, OlmoConfig, OlmoForCausalLM  # noqa: E402

from tying.hub.fetch import fetch_model  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    records.add_flag(parser)
    args = parser.parse_args()
    figures = []
    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        config = OlmoConfig(
            vocab_size=8192,
            hidden_size=128,
            intermediate_size=1536,
            num_hidden_layers=16,
            num_attention_heads=4,
            bos_token_id=0,
            eos_token_id=0,
            pad_token_id=0,
            tie_word_embeddings=False,
        )
        torch.manual_seed(0)
        OlmoForCausalLM(config).save_pretrained(work / "model")
        add_snapshot(work / "cache", "bench/olmo-like", "step0", work / "model")
        pythia = GPTNeoXConfig(
            vocab_size=8192,
            hidden_size=128,
            intermediate_size=512,
            num_hidden_layers=16,
            num_attention_heads=4,
            tie_word_embeddings=False,
        )
        model = GPTNeoXForCausalLM(pythia).half()
        pythia.save_pretrained(work / "pythia")
        torch.save(model.state_dict(), work / "pythia" / "pytorch_model.bin")
        add_snapshot(work / "cache", "bench/pythia-like", "step0", work / "pythia")
        with serve_hub(work / "cache") as (endpoint, sent):
            constants.HF_HUB_OFFLINE = False
            constants.HF_HUB_CACHE = str(work / "empty-cache")
            constants.ENDPOINT = endpoint
            constants.HUGGINGFACE_CO_URL_TEMPLATE = endpoint + "/{repo_id}/resolve/{revision}/{filename}"
            for repo, embeddings_only in [(r, e) for r in ("bench/olmo-like", "bench/pythia-like") for e in (1, 0)]:
                sent.clear()
                start = time.perf_counter()
                record = fetch_model(repo, "step0", work / f"out-{repo}-{embeddings_only}", embeddings_only)
                seconds = time.perf_counter() - start
                print(
                    f"{repo:18} embeddings_only={bool(embeddings_only)!s:5}  bytes_read={record['bytes_read']:>11,}"
                    f"  bytes_served={sum(sent.values()):>11,}  seconds={seconds:.2f}"
                )
                kind = "embeddings only" if embeddings_only else "whole model"
                figures.append((f"{repo.removeprefix('bench/')}, {kind}: bytes read", record["bytes_read"], "bytes"))
    if args.record is not None:
        records.append(figures, peak=None, note=args.record)


if __name__ == "__main__":
    main()

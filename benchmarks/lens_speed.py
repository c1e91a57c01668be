"""Time one tuned lens (train + evaluate) on a default-size model; print KL by layer.

The model is the default config's OLMo (hidden 96, 3 layers, 4 heads, vocab 4096, seq 64),
trained briefly on a synthetic Markov stream so that its layers have something to say.
The lens recipe and budget are config.yaml's `lens:` section unless overridden.
Usage: .venv/bin/python benchmarks/lens_speed.py [--steps N] [--batch-size N] [--optimizer sgd|adam] [--lr LR]
[--no-clip] [--threads 1] [--no-heap] (leave glibc's malloc thresholds as they are, as lens jobs did before
tying.runtime)
"""
import argparse
import time
from pathlib import Path

import numpy as np
import torch
import yaml
from transformers import AutoModelForCausalLM, OlmoConfig

from tying.lens import evaluate_lens, recipe, train_lens
from tying.runtime import keep_freed_memory
from tying.unembed import frozen_model

VOCAB, SEQ = 4096, 64
MODEL_DIR = Path(__file__).parent / "out" / "lens_speed_model"


def markov_tokens(n, seed):
    """A stream where each token has 4 likely successors: (n,) uint16."""
    rng = np.random.default_rng(seed)
    successors = rng.integers(0, VOCAB, size=(VOCAB, 4))
    weights = np.array([0.55, 0.25, 0.15, 0.05])
    out = np.empty(n, dtype=np.uint16)
    out[0] = 0
    choice = rng.choice(4, size=n, p=weights)
    for i in range(1, n):
        out[i] = successors[out[i - 1], choice[i]]
    return out


def trained_model(tokens):
    """The benchmark model, trained once (200 Adam steps) and cached under benchmarks/out/."""
    if not MODEL_DIR.exists():
        torch.manual_seed(0)
        config = OlmoConfig(vocab_size=VOCAB, hidden_size=96, num_hidden_layers=3, num_attention_heads=4,
                            intermediate_size=384, max_position_embeddings=SEQ, tie_word_embeddings=True)
        model = AutoModelForCausalLM.from_config(config)
        opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
        rng = np.random.default_rng(0)
        for _ in range(200):
            starts = rng.integers(0, len(tokens) - SEQ, size=16)
            ids = torch.from_numpy(np.stack([tokens[s : s + SEQ].astype(np.int64) for s in starts]))
            loss = model(input_ids=ids, labels=ids).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
        print(f"benchmark model trained, final loss {loss.item():.2f} nats")
        model.save_pretrained(MODEL_DIR)
    return frozen_model(MODEL_DIR)


def main():
    cfg = yaml.safe_load((Path(__file__).parents[1] / "config.yaml").read_text())["lens"]
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=cfg["steps"])
    parser.add_argument("--batch-size", type=int, default=cfg["batch_size"])
    parser.add_argument("--optimizer", choices=["sgd", "adam"], default=cfg["optimizer"])
    parser.add_argument("--lr", type=float, default=cfg["lr"])
    parser.add_argument("--no-clip", action="store_true", help="no gradient clipping (the recipe before tuned-lens's)")
    parser.add_argument("--eval-batches", type=int, default=cfg["eval_batches"])
    parser.add_argument("--threads", type=int, default=1, help="the lens rule's default")
    parser.add_argument("--no-heap", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if not args.no_heap:
        keep_freed_memory()
    train, val = markov_tokens(300_000, seed=1), markov_tokens(60_000, seed=2)
    model = trained_model(train)
    wall, cpu = time.perf_counter(), time.process_time()
    cfg = {**cfg, "steps": args.steps, "batch_size": args.batch_size, "seq_len": SEQ, "optimizer": args.optimizer,
           "lr": args.lr, "grad_clip": None if args.no_clip else cfg["grad_clip"]}
    lens = train_lens(model, train, **recipe(cfg))
    trained_wall, trained_cpu = time.perf_counter() - wall, time.process_time() - cpu
    frame = evaluate_lens(model, lens, val, seq_len=SEQ, batch_size=args.batch_size, batches=args.eval_batches)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(frame.pivot(index="layer", columns="lens", values="kl_bits").round(3).to_string())
    print(f"{recipe(cfg)} threads={args.threads}: "
          f"train {trained_wall:.1f} s wall / {trained_cpu:.1f} s CPU; train+eval {wall:.1f} s wall / {cpu:.1f} s CPU")


if __name__ == "__main__":
    main()

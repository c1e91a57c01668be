"""Does our "tuned_lens" procedure (tying.lens.procedures) train as tuned-lens 0.2 itself does? Prints figures.

tuned-lens 0.2 is not a dependency: install it apart, without its dependencies, and name the folder:

    .venv/bin/pip install --no-deps --target /tmp/tl tuned-lens==0.2.0 simple_parsing docstring_parser
    .venv/bin/python benchmarks/studies/tuned_lens_check.py BUILD --package /tmp/tl
        [--runs olmo/tied/seed0 olmo/untied/seed0] [--budgets 50 250] [--folders] [--record [NOTE]]

BUILD: a directory holding a build's results/checkpoints and results/tokens (the default build's). For each run and
budget, two lenses train on the same windows (batch_size x seq_len tokens a step, drawn as train_lens draws them)
from the same zero start: ours, `train_lens` under procedure_recipe("tuned_lens"), and the package's, its own
`TunedLens` and `Unembed` (tuned_lens/nn), its own `Optimizer` ingredient's `create_optim` and
`create_scheduler` (tuned_lens/scripts/ingredients.py, defaults as `tuned_lens train` leaves them), and the step
body of its `Train.execute` (scripts/train_loop.py: the KL to the model's own log-softmax per state, the
gradient's norm clipped at 1.0, step, zero_grad, scheduler step), in float32 rather than its bfloat16 autocast.
Both are scored by window_kl on every validation window; the script prints each state's held-out KL under both and
their largest difference. The package's dataset and model loading (hub names) and its torchdata pipeline are not
used: `torchdata` is stubbed, and OLMo's final norm, which its model_surgery predates, is named for it.
With --folders, the other direction too: the package loads each run's lens as the build wrote it in tuned-lens's
format (`results/lens/main/{role}/seed{N}.tuned-lens`, `TunedLens.from_model_and_pretrained`) and scores it with
its own forward, beside our reading of the same folder (`load_tuned_lens`, window_kl).
"""

import argparse
import sys
import types
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import yaml

from tying.data.tokens import load_ids
from tying.lens.fitting import train_lens
from tying.lens.procedures import procedure_recipe
from tying.lens.scoring import scoring_args, state_means, window_kl
from tying.lens.translators import TunedLens
from tying.lens.tuned_lens_format import load_tuned_lens
from tying.lens.unembed import final_norm, token_windows
from tying.runtime import configure
from tying.train.models import frozen_model

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))  # records.py and train_bench's GEMM peak

import records  # noqa: E402
from train_bench import gemm_peak  # noqa: E402


def package(path):
    """tuned-lens's TunedLens, Unembed and Optimizer, imported from `path` with torchdata stubbed."""
    sys.path.insert(0, str(path))
    stub = types.ModuleType("torchdata")
    stub.dataloader2 = types.SimpleNamespace(
        DataLoader2=object, MultiProcessingReadingService=object, DistributedReadingService=object
    )
    stub.datapipes = types.SimpleNamespace()
    sys.modules.setdefault("torchdata", stub)
    from tuned_lens import model_surgery
    from tuned_lens.nn.lenses import TunedLens as PackageLens
    from tuned_lens.nn.unembed import Unembed
    from tuned_lens.scripts.ingredients import Optimizer

    model_surgery.get_final_norm = final_norm  # its table predates OLMo
    return PackageLens, Unembed, Optimizer


def package_lens(model, tokens, cfg, steps, seed, classes):
    """A lens trained by the package's pieces on train_lens's windows; returned as our TunedLens."""
    PackageLens, Unembed, Optimizer = classes
    lens = PackageLens.from_model(model)
    options = Optimizer()
    opt = options.create_optim(list(lens.parameters()))
    scheduler = options.create_scheduler(opt, steps)
    rng, seq_len = np.random.default_rng(seed), cfg["seq_len"]
    for _ in range(steps):
        starts = rng.integers(0, len(tokens) - seq_len + 1, size=cfg["batch_size"])
        with torch.no_grad():
            output = model(input_ids=token_windows(tokens, starts, seq_len, model.device), output_hidden_states=True)
        labels = output.logits.float().log_softmax(dim=-1)
        for i, h in enumerate(output.hidden_states[:-1]):
            logits = lens(h, idx=i)
            loss = torch.sum(labels.exp() * (labels - logits.log_softmax(-1)), dim=-1).mean()
            loss.backward()
        torch.nn.utils.clip_grad_norm_(lens.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=False)
        scheduler.step()
    ours = TunedLens(model.config.num_hidden_layers, model.config.hidden_size)
    with torch.no_grad():
        for i, translator in enumerate(lens.layer_translators):
            ours.weight[i], ours.bias[i] = translator.weight, translator.bias
    return ours.eval()


@torch.no_grad()
def package_folder_kl(model, folder, val, cfg, classes):
    """Held-out KL (bits) per state 0..L-1 of the tuned-lens folder as the package loads and applies it, on the
    windows window_kl scores."""
    lens = classes[0].from_model_and_pretrained(model, folder)
    seq_len, batches = cfg["seq_len"], cfg["eval_batches"]
    ids = torch.from_numpy(np.asarray(val[: len(val) // seq_len * seq_len], dtype=np.int64)).view(-1, seq_len)
    ids = ids if batches is None else ids[: batches * cfg["batch_size"]]
    total = np.zeros(model.config.num_hidden_layers)
    for batch in ids.split(cfg["batch_size"]):
        out = model(input_ids=batch, output_hidden_states=True)
        log_p = out.logits.float().log_softmax(-1)
        for i, h in enumerate(out.hidden_states[:-1]):
            log_q = lens(h, idx=i).float().log_softmax(-1)
            total[i] += (log_p.exp() * (log_p - log_q)).sum(-1).mean(-1).sum().item()
    return pd.Series(total / len(ids) / np.log(2))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("build", type=Path)
    parser.add_argument("--package", type=Path, required=True, help="the folder tuned-lens 0.2 was installed into")
    parser.add_argument("--runs", nargs="+", default=["olmo/tied/seed0", "olmo/untied/seed0"])
    parser.add_argument("--budgets", nargs="+", type=int, default=[50, 250])
    parser.add_argument("--folders", action="store_true", help="also: the package loads the build's lens folders")
    records.add_flag(parser)
    args = parser.parse_args()
    configure(1)
    classes = package(args.package)
    cfg = {**yaml.safe_load((ROOT / "config.yaml").read_text())["lens"], "train_dtype": "float32"}
    build = yaml.safe_load((ROOT / "config.yaml").read_text())
    tokens = args.build / "results" / "tokens"
    train, val = (load_ids(tokens / f"{split}.json", tokens / "meta.json") for split in ("train", "val"))
    scoring = scoring_args(cfg)
    trained, loaded = [], []  # the largest |KL difference| of each trained lens pair, each folder read both ways
    for run in args.runs:
        model = frozen_model(args.build / "results" / "checkpoints" / run / f"step{build['train']['steps']}")
        seed = int(run.rsplit("seed", 1)[1])
        for steps in args.budgets:
            lenses = {
                "ours": train_lens(model, train, **procedure_recipe("tuned_lens", cfg, steps), seed=seed),
                "tuned-lens 0.2": package_lens(model, train, cfg, steps, seed, classes),
            }
            kl = pd.DataFrame(
                {
                    name: state_means(window_kl(model, lens, val, **scoring, logit=False)).set_index("layer")["kl_bits"]
                    for name, lens in lenses.items()
                }
            )
            gap = (kl["ours"] - kl["tuned-lens 0.2"]).abs().max()
            print(
                f"\n{run}, {steps} steps: held-out KL (bits) by state\n{kl.round(5).to_string()}\n"
                f"largest |difference| {gap:.2e} bits"
            )
            trained.append(gap)
        folder = args.build / "results" / "lens" / "main" / run.split("/")[1] / f"seed{seed}.tuned-lens"
        if args.folders:
            ours = state_means(window_kl(model, load_tuned_lens(folder, model), val, **scoring, logit=False))
            kl = pd.DataFrame(
                {
                    "ours": ours.set_index("layer")["kl_bits"],
                    "tuned-lens 0.2": package_folder_kl(model, folder, val, cfg, classes),
                }
            ).dropna()
            gap = (kl["ours"] - kl["tuned-lens 0.2"]).abs().max()
            print(
                f"\n{folder}, loaded by both: held-out KL (bits) by state\n{kl.round(5).to_string()}\n"
                f"largest |difference| {gap:.2e} bits"
            )
            loaded.append(gap)
    figures = [
        (
            f"largest |KL difference|, ours vs the package, {' and '.join(map(str, args.budgets))} steps",
            float(f"{max(trained):.3g}"),
            "bits",
        )
    ]
    figures += (
        [("largest |KL difference|, the build's lens folders read by both", float(f"{max(loaded):.3g}"), "bits")]
        if loaded
        else []
    )
    print("\n" + "; ".join(f"{name}: {value:.3g} {unit}" for name, value, unit in figures))
    if args.record is not None:
        records.append(figures, peak=gemm_peak(1)[1], setting=" and ".join(args.runs), note=args.record)


if __name__ == "__main__":
    main()

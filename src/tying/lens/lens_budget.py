"""C3 against the lens's budget: one model's held-out KL per state under each lens procedure at each budget and,
for the tuned_lens procedure, each batch (windows a step).

Each (procedure, batch, steps) is its own lens, trained from the zero start with the same seed (the same
windows in the same order), since a procedure's schedule depends on its budget; every lens is scored on the
held-out windows the lens job scores (`tying.lens.scoring.window_kl`). The state-0 floors (`tying.lens.floor`) ride
along as columns.
"""

import sys
import time

import pandas as pd

from tying.lens.fitting import train_lens
from tying.lens.floor import state0_floors
from tying.lens.procedures import procedure_recipe
from tying.lens.scoring import scoring_args, state_means, window_kl
from tying.lens.unembed import Readout


def sweep_lenses(model, train, val, cfg, procedures, budgets, *, seed, batch_sizes=None):
    """Held-out KL per state of each procedure's lens at each budget (the logit lens: once, at 0 steps).

    cfg: the config's `lens:` section (windows, the certified recipe, scoring); budgets: optimiser steps;
    batch_sizes: the tuned_lens procedure's windows a step (None: lens.batch_size; the others keep it).
    Returns procedure, batch_size (windows a step), tokens_per_step (batch_size x seq_len), steps, tokens
    (steps x tokens_per_step: the tokens the lens trained on), layer, kl_bits, floor_bits and readout_floor_bits
    (the state-0 floors, the same on every row).
    """
    scoring = scoring_args(cfg)
    frames = []
    for name in procedures:
        for batch in (batch_sizes or [cfg["batch_size"]]) if name == "tuned_lens" else [cfg["batch_size"]]:
            for steps in [0] if name == "logit" else budgets:
                start = time.perf_counter()
                lens = train_lens(
                    model, train, **procedure_recipe(name, {**cfg, "batch_size": batch}, steps), seed=seed
                )
                kl = state_means(window_kl(model, lens, val, **scoring, logit=False))
                frames.append(
                    kl[["layer", "kl_bits"]].assign(
                        procedure=name,
                        batch_size=batch,
                        steps=steps,
                        tokens_per_step=batch * cfg["seq_len"],
                        tokens=steps * batch * cfg["seq_len"],
                    )
                )
                print(
                    f"lens budget: {name} {steps} steps of {batch} windows, state 0 {kl['kl_bits'].iloc[0]:.4f} "
                    f"bits ({time.perf_counter() - start:.1f} s)",
                    file=sys.stderr,
                    flush=True,
                )
    floors = state0_floors(model, Readout(model), val, **scoring)
    return pd.concat(frames, ignore_index=True).assign(**floors)[
        [
            "procedure",
            "batch_size",
            "tokens_per_step",
            "steps",
            "tokens",
            "layer",
            "kl_bits",
            "floor_bits",
            "readout_floor_bits",
        ]
    ]

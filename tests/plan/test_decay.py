"""Weight decay alone under a run's own schedule (tying.plan.decay), C6 measured net of it, and the
train.total_decay regime (configs/trained-decay.yaml)."""

import dataclasses
import json
import math

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from snakerun import ROOT, snakemake

from tying.claims import statistics as per_seed
from tying.claims import verdicts
from tying.metrics.norm_frequency import norm_frequency_frame
from tying.plan.config import prepared
from tying.plan.decay import checkpoint_level, learning_rates, no_gradient_level, total_decay, weight_decay_for
from tying.plan.grid import cells
from tying.plan.run_params import run_params
from tying.plan.run_spec import RunSpec
from tying.train.loop import build

MICRO = yaml.safe_load((ROOT / "tests" / "micro.yaml").read_text())
PAPER_TOTAL_DECAY = 0.1635285  # configs/trained-decay.yaml's train.total_decay


def spec(**kw):
    base = dict(
        family="olmo",
        vocab_size=64,
        eos_id=0,
        hidden_size=16,
        layers=1,
        heads=2,
        intermediate_size=None,
        seq_len=8,
        tied=False,
        input_grad_scale=1.0,
        seed=0,
        steps=5,
        batch_size=2,
        lr=0.1,
        warmup=2,
        min_lr_ratio=0.1,
        weight_decay=0.5,
        grad_clip=1.0,
        checkpoints=(0, 5),
        eval_batches=1,
    )
    return RunSpec(**{**base, **kw})


def test_the_no_gradient_level_of_a_planted_schedule_is_one_minus_the_product_of_its_decay_factors():
    # warmup 2 of 5 steps: factors 1/2, 1, then cosine from 1 to 0.1 over the last 3 (at 0, 1/3, 2/3 of the way)
    lrs = [0.05, 0.1, 0.1, 0.1 * (0.1 + 0.45 * 1.5), 0.1 * (0.1 + 0.45 * 0.5)]
    assert learning_rates(spec()) == pytest.approx(lrs, abs=1e-12)
    assert no_gradient_level(spec()) == pytest.approx(1 - math.prod(1 - lr * 0.5 for lr in lrs), abs=1e-12)
    assert total_decay(spec()) == pytest.approx(0.5 * sum(lrs), abs=1e-12)
    assert no_gradient_level(spec(), steps=2) == pytest.approx(1 - (1 - 0.025) * (1 - 0.05), abs=1e-12)
    assert no_gradient_level(spec(weight_decay=0.0)) == 0.0


def test_the_training_optimizer_shrinks_a_row_without_gradient_by_exactly_the_level():
    """loop.build's AdamW and schedule: the embeddings are decayed, and a zero gradient leaves decay alone."""
    s = spec(steps=20, warmup=4)
    model, _, opt, sched = build(s, "cpu")
    embedding = model.get_input_embeddings().weight
    assert next(g["weight_decay"] for g in opt.param_groups if any(p is embedding for p in g["params"])) == 0.5
    start = embedding.detach().norm(dim=1).clone()
    for _ in range(s.steps):
        for p in model.parameters():
            p.grad = torch.zeros_like(p)
        opt.step()
        sched.step()
    ratio = embedding.detach().norm(dim=1) / start
    assert ratio.numpy() == pytest.approx(1 - no_gradient_level(s), rel=1e-5)
    assert 1 - no_gradient_level(s) < 0.9  # the decay did shrink the rows


def test_the_authors_10k_step_config_has_a_total_decay_of_0164():
    """Their OLMo/configs/custom/OLMo-1B-tied-emb5-10000.yaml (lr 3e-4, warmup 1,000, cosine to 0.1, wd 0.1,
    10,000 steps) under this project's schedule function: total decay 0.164, no-gradient level 0.151."""
    authors = spec(steps=10_000, lr=3e-4, warmup=1_000, min_lr_ratio=0.1, weight_decay=0.1)
    assert total_decay(authors) == pytest.approx(PAPER_TOTAL_DECAY, abs=1e-6)
    assert round(total_decay(authors), 3) == 0.164 and round(no_gradient_level(authors), 3) == 0.151
    overlay = yaml.safe_load((ROOT / "configs" / "trained-decay.yaml").read_text())
    assert overlay["train"]["total_decay"] == PAPER_TOTAL_DECAY
    # the default regime and the trained one (configs/trained.yaml: 6,000 steps, warmup 300) at wd 0.1
    default = spec(steps=1000, lr=0.004, warmup=100, weight_decay=0.1)
    assert (round(total_decay(default), 3), round(no_gradient_level(default), 3)) == (0.218, 0.196)
    trained = spec(steps=6000, lr=0.004, warmup=300, weight_decay=0.1)
    assert (round(total_decay(trained), 2), round(no_gradient_level(trained), 2)) == (1.31, 0.73)


def test_a_total_decay_target_sets_the_weight_decay_that_yields_it():
    trained = spec(steps=6000, lr=0.004, warmup=300, weight_decay=0.1)
    decayed = dataclasses.replace(trained, weight_decay=weight_decay_for(trained, PAPER_TOTAL_DECAY))
    assert total_decay(decayed) == pytest.approx(PAPER_TOTAL_DECAY, abs=1e-6)
    assert decayed.weight_decay == pytest.approx(0.1 * PAPER_TOTAL_DECAY / total_decay(trained), rel=1e-12)
    assert weight_decay_for(trained, 2 * PAPER_TOTAL_DECAY) == pytest.approx(2 * decayed.weight_decay, rel=1e-12)


def test_run_params_resolve_train_total_decay_into_the_runs_weight_decay():
    """The train rule's params carry the resolved weight decay, so the job needs nothing else: the total over
    the run's own schedule is the target; without train.total_decay, train.weight_decay as given."""
    config = prepared("configs/trained-decay.yaml").config
    (cell,) = cells(config)
    run = run_params(config, cell.name, "untied")
    unit = RunSpec.from_dict({**run, "seed": 0, "vocab_size": 8, "eos_id": 0})
    assert total_decay(unit) == pytest.approx(PAPER_TOTAL_DECAY, abs=1e-9) and run["weight_decay"] < 0.1
    default = prepared().config
    assert run_params(default, "olmo", "untied")["weight_decay"] == default["train"]["weight_decay"]


def test_checkpoint_level_reads_the_runs_training_record(tmp_path):
    s = spec()
    (tmp_path / "training.json").write_text(json.dumps({**s.to_dict(), "step": 3, "val_loss": 1.0, "weights": {}}))
    assert checkpoint_level(tmp_path) == pytest.approx(no_gradient_level(s, steps=3), abs=1e-12)
    assert math.isnan(checkpoint_level(tmp_path / "released"))  # no record: a hub model's schedule is unknown


LEVEL = 0.196


def planted_norms(grow=1.0, level=LEVEL):
    """Untied input norms of 3 seeds over 400 tokens drawn 1 to ~10^5 times: each row its step-0 norm times
    1 - `level` (weight decay alone), the rows drawn 1,000 times or more `grow` times that."""
    rows = []
    for seed in range(3):
        rng = np.random.default_rng(seed)
        drawn = np.round(10 ** np.linspace(0, 5, 400)).astype(int)
        start = 1.0 + 0.05 * rng.standard_normal(400)
        norm = start * (1 - level) * np.where(drawn >= 1000, grow, 1.0)
        for matrix in ("untied_input", "untied_output", "tied"):
            rows.append(
                pd.DataFrame(
                    {
                        "pair": "main",
                        "seed": seed,
                        "matrix": matrix,
                        "token_id": np.arange(400),
                        "drawn": drawn,
                        "norm": norm,
                        "initial_norm": start,
                        "no_gradient_level": level,
                    }
                )
            )
    return pd.concat(rows, ignore_index=True)


def test_c6c_of_input_rows_without_gradient_is_zero_net_of_decay():
    statistics = per_seed.claim_statistics(norm_freq=planted_norms(), norm_shuffles=10)
    assert statistics["C6c"].values.to_numpy() == pytest.approx([0, 0, 0], abs=1e-6)
    table = verdicts.claims_table(statistics).set_index("claim")
    assert table.loc["C6c", "mean"] == pytest.approx(0, abs=1e-6) and table.loc["C6c", "verdict"] == "holds"
    assert table.loc["C6c", "no_gradient_level_mean"] == pytest.approx(LEVEL)
    assert table.loc["C6a", "no_gradient_level"] == table.loc["C6c", "no_gradient_level"] == "0.196"
    assert table.loc["C6c", "detail"] == "decay included (|final / step-0 - 1|): 0.196 [0.196, 0.196]"
    assert math.isnan(table.loc["C6b", "no_gradient_level_mean"])


def test_c6c_shows_a_growth_of_the_frequent_rows_beyond_decay():
    statistics = per_seed.claim_statistics(norm_freq=planted_norms(grow=1.5), norm_shuffles=10)
    assert statistics["C6c"].values.to_numpy() == pytest.approx([0.5, 0.5, 0.5], abs=1e-6)
    raw = abs(1.5 * (1 - LEVEL) - 1)  # with the decay left in, the growth reads as 0.206
    assert "decay included (|final / step-0 - 1|): " + f"{raw:.3f}" in statistics["C6c"].detail
    flat = per_seed.claim_statistics(norm_freq=planted_norms(grow=1.5, level=0.0), norm_shuffles=10)
    assert statistics["C6a"].values.to_numpy() == pytest.approx(flat["C6a"].values.to_numpy(), abs=1e-12)


def test_c6c_without_a_training_record_stays_raw_and_says_so():
    frame = planted_norms().assign(no_gradient_level=np.nan)
    statistics = per_seed.claim_statistics(norm_freq=frame, norm_shuffles=10)
    assert statistics["C6c"].values.to_numpy() == pytest.approx([LEVEL] * 3, abs=1e-6)
    assert statistics["C6c"].detail == "no training record: weight decay not removed"


def test_the_norm_frequency_frame_carries_each_runs_level():
    from tying.checkpoints.embeddings import Embeddings

    tokens = [f"t{i}" for i in range(4)]
    untied = Embeddings(input=torch.ones(4, 2), output=2 * torch.ones(4, 2), tied=False, tokens=tuple(tokens))
    matrix = 3 * torch.ones(4, 2)
    tied = Embeddings(input=matrix, output=matrix, tied=True, tokens=tuple(tokens))
    frame = norm_frequency_frame(untied, tied, pd.DataFrame({"token_id": [0, 2], "count": [5, 7]}), levels=(0.2, 0.3))
    assert frame.groupby("matrix")["no_gradient_level"].first().to_dict() == {
        "tied": 0.3,
        "untied_input": 0.2,
        "untied_output": 0.2,
    }


def test_train_total_decay_sets_the_runs_weight_decay_and_its_norm_metric_reads_the_level(tmp_path):
    """The micro config with train.total_decay: each run's recorded weight decay gives the target over its own
    schedule, and Figure 5's metric (C6's frame) carries the run's level at the analysed step."""
    config = {**MICRO, "train": {**MICRO["train"], "total_decay": 0.02}}
    target = "results/metrics/norm_freq/main/seed0.parquet"
    result = snakemake(tmp_path, target, config=config)
    assert result.returncode == 0, result.stderr[-3000:]
    record = json.loads((tmp_path / "results/checkpoints/olmo/untied/seed0/step6/training.json").read_text())
    run = RunSpec.from_dict({k: v for k, v in record.items() if k not in ("step", "val_loss", "weights")})
    assert total_decay(run) == pytest.approx(0.02, abs=1e-6) and run.weight_decay != 0.1
    frame = pd.read_parquet(tmp_path / target)
    level = frame.loc[frame["matrix"] == "untied_input", "no_gradient_level"].unique()
    assert level == pytest.approx([no_gradient_level(run, steps=6)], abs=1e-12)

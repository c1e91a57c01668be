import dataclasses
import json
import platform
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import markov_tokens, word_tokenizer
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

from tying.data.batches import train_batch
from tying.errors import PipelineError
from tying.plan.run_spec import RunSpec, lr_lambda
from tying.runtime import keep_freed_memory
from tying.train.cross_entropy import NextTokenLoss
from tying.train.loop import build, train, write_rows

V = 64


@pytest.fixture(scope="module")
def data():
    ids = markov_tokens(22_000, V, seed=1)
    return ids[:20_000], ids[20_000:]


@pytest.fixture(scope="module")
def tokenizer():
    return word_tokenizer(V)


def spec(**kw):
    base = dict(
        family="olmo",
        vocab_size=V,
        eos_id=0,
        hidden_size=16,
        layers=2,
        heads=2,
        intermediate_size=32,
        seq_len=16,
        tied=True,
        input_grad_scale=1.0,
        seed=0,
        steps=12,
        batch_size=4,
        lr=1e-2,
        warmup=2,
        min_lr_ratio=0.1,
        weight_decay=0.1,
        grad_clip=1.0,
        checkpoints=(0, 4, 8, 12),
        eval_batches=2,
    )
    return RunSpec(**{**base, **kw})


def run(s, data, tokenizer, root, until=None):
    ckpts = {step: root / f"step{step}" for step in s.checkpoints}
    train(
        s,
        *data,
        tokenizer,
        root / "work",
        checkpoint_dirs=ckpts,
        log_path=root / "log.parquet",
        provenance_path=root / "provenance.parquet",
        log_every=100,
        until=until,
    )
    return ckpts


@pytest.mark.parametrize("until", [6, 0])  # dies after step 6 (the last saved state is step 4), or right after step 0's
def test_resume_after_a_kill_is_bit_identical(data, tokenizer, tmp_path, until):
    s = spec()
    straight = run(s, data, tokenizer, tmp_path / "straight")
    killed = tmp_path / "killed"
    run(s, data, tokenizer, killed, until=until)
    assert (killed / "work" / "state.pt").exists() and not (killed / "log.parquet").exists()
    resumed = run(s, data, tokenizer, killed)
    for step in s.checkpoints:
        a, b = load_file(straight[step] / "model.safetensors"), load_file(resumed[step] / "model.safetensors")
        assert a.keys() == b.keys()
        assert all(torch.equal(a[k], b[k]) for k in a)
    pd.testing.assert_frame_equal(
        pd.read_parquet(tmp_path / "straight" / "log.parquet"), pd.read_parquet(killed / "log.parquet")
    )
    pd.testing.assert_frame_equal(
        pd.read_parquet(tmp_path / "straight" / "provenance.parquet"), pd.read_parquet(killed / "provenance.parquet")
    )
    assert not (killed / "work").exists()


def test_state_of_another_config_is_not_resumed(data, tokenizer, tmp_path):
    run(spec(), data, tokenizer, tmp_path / "a", until=6)
    other = dataclasses.replace(spec(), lr=2e-2)
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "work").rename(tmp_path / "b" / "work")
    fresh = run(other, data, tokenizer, tmp_path / "b")
    reference = run(other, data, tokenizer, tmp_path / "c")
    a, b = load_file(fresh[12] / "model.safetensors"), load_file(reference[12] / "model.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("family,tied", [("olmo", True), ("olmo", False), ("gpt_neox", True), ("gpt_neox", False)])
def test_exported_checkpoint_loads_and_gives_the_training_logits(family, tied, data, tokenizer, tmp_path):
    s = spec(family=family, tied=tied, steps=4, checkpoints=(0, 4))
    ckpts = run(s, data, tokenizer, tmp_path)
    loaded = AutoModelForCausalLM.from_pretrained(ckpts[4]).eval()
    assert (loaded.get_input_embeddings().weight is loaded.get_output_embeddings().weight) == tied
    state = load_file(ckpts[4] / "model.safetensors")
    assert (len([k for k in state if "embed" in k or "lm_head" in k]) == 1) == tied
    model = build(s, "cpu")[0]
    model.load_state_dict(loaded.state_dict())
    x, _ = train_batch(data[0], 1, 0, 2, 16)
    with torch.no_grad():
        assert torch.equal(loaded(input_ids=x).logits, model.eval()(input_ids=x).logits)
    meta = json.loads((ckpts[4] / "training.json").read_text())
    assert meta["step"] == 4 and meta["tied"] == tied
    assert PreTrainedTokenizerFast.from_pretrained(ckpts[4]).eos_token == "t0"


def test_variants_of_a_seed_see_the_same_batches_and_differ_across_seeds(data):
    a, b = train_batch(data[0], 7, 3, 4, 16), train_batch(data[0], 7, 3, 4, 16)
    assert torch.equal(a[0], b[0]) and torch.equal(a[0][:, 1:], a[1][:, :-1])
    assert not torch.equal(a[0], train_batch(data[0], 7, 4, 4, 16)[0])
    assert not torch.equal(a[0], train_batch(data[0], 8, 3, 4, 16)[0])


def test_each_epoch_reads_every_window_once_in_its_own_order():
    ids = np.arange(1_005)  # 100 windows of 11 tokens at stride 10; the last 4 tokens are never read
    firsts = torch.cat([train_batch(ids, step, 0, 3, 10)[0][:, 0] for step in range(1, 101)]).numpy()
    epochs = firsts.reshape(3, 100)  # 100 steps of 3 windows: three epochs, steps 34 and 67 straddle two
    for epoch in epochs:
        assert sorted(epoch) == list(range(0, 1_000, 10))
    assert not np.array_equal(epochs[0], epochs[1]) and not np.array_equal(epochs[1], epochs[2])
    x, y = train_batch(ids, 34, 0, 3, 10)
    assert x.shape == y.shape == (3, 10) and x.dtype == torch.int64
    assert torch.equal(y - x, torch.ones(3, 10, dtype=torch.int64))
    assert np.array_equal(x[:, 0].numpy(), firsts[99:102])
    with pytest.raises(PipelineError, match="^training split has 10 tokens, fewer than one window of 11$"):
        train_batch(ids[:10], 1, 0, 3, 10)


def test_training_lowers_validation_loss_and_logs_provenance(data, tokenizer, tmp_path):
    s = spec(tied=True, input_grad_scale=5.0, steps=30, checkpoints=(0, 30))
    run(s, data, tokenizer, tmp_path)
    log = pd.read_parquet(tmp_path / "log.parquet").dropna(subset=["val_loss"])
    assert log["val_loss"].iloc[-1] < log["val_loss"].iloc[0] - 0.5
    prov = pd.read_parquet(tmp_path / "provenance.parquet")
    assert list(prov["step"]) == list(range(1, 31))
    np.testing.assert_allclose(prov["g_in"], 5.0 * prov["g_in_raw"], rtol=1e-5)
    assert prov["out_share"].between(0, 1).all()


def test_gradient_accumulation_matches_one_pass(data, tokenizer, tmp_path):
    """Four micro-batches per step give the losses, provenance and weights of one full batch."""
    one = run(spec(input_grad_scale=5.0), data, tokenizer, tmp_path / "one")
    four = run(spec(input_grad_scale=5.0, grad_accum=4), data, tokenizer, tmp_path / "four")
    for name in ("log.parquet", "provenance.parquet"):
        a, b = (pd.read_parquet(tmp_path / d / name) for d in ("one", "four"))
        pd.testing.assert_frame_equal(a, b, rtol=1e-5, atol=1e-7)
    a, b = load_file(one[12] / "model.safetensors"), load_file(four[12] / "model.safetensors")
    assert all(torch.allclose(a[k], b[k], atol=1e-5) for k in a)


def test_bfloat16_autocast_trains_with_fp32_weights(data, tokenizer, tmp_path):
    ckpts = run(spec(dtype="bfloat16", steps=20, checkpoints=(0, 20)), data, tokenizer, tmp_path)
    log = pd.read_parquet(tmp_path / "log.parquet").dropna(subset=["val_loss"])
    assert log["val_loss"].iloc[-1] < log["val_loss"].iloc[0] - 0.3
    assert all(t.dtype == torch.float32 for t in load_file(ckpts[20] / "model.safetensors").values())


@pytest.mark.parametrize("family", ["olmo", "gpt_neox", "llama", "qwen3"])
def test_every_family_the_readme_lists_takes_a_training_step(family, data, tokenizer, tmp_path):
    """One forward and backward step of each family at 4 heads (Qwen3Config's defaults assume 32)."""
    ckpts = run(spec(family=family, tied=False, heads=4, steps=1, checkpoints=(0, 1)), data, tokenizer, tmp_path)
    assert np.isfinite(pd.read_parquet(tmp_path / "log.parquet")["loss"].iloc[-1])
    before, after = load_file(ckpts[0] / "model.safetensors"), load_file(ckpts[1] / "model.safetensors")
    assert before.keys() == after.keys()
    assert all(not torch.equal(before[k], after[k]) for k in before)  # every parameter got an update
    assert AutoModelForCausalLM.from_pretrained(ckpts[1]).config.model_type == family


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_kept_heap_changes_no_number(data, tokenizer, tmp_path):
    """tying.runtime changes where freed memory goes, never a result: same weights and logs either way."""
    s = spec(steps=4, checkpoints=(0, 4))
    before = run(s, data, tokenizer, tmp_path / "before")
    assert keep_freed_memory()
    after = run(s, data, tokenizer, tmp_path / "after")
    a, b = load_file(before[4] / "model.safetensors"), load_file(after[4] / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    pd.testing.assert_frame_equal(
        pd.read_parquet(tmp_path / "before" / "provenance.parquet"),
        pd.read_parquet(tmp_path / "after" / "provenance.parquet"),
    )


def test_logs_written_without_pandas_read_back_as_the_frame_of_their_rows(tmp_path):
    rows = [
        {"step": 0, "lr": 0.0, "loss": float("nan"), "val_loss": 5.5},
        {"step": 1, "lr": 1e-3, "loss": 5.25, "val_loss": float("nan")},
    ]
    write_rows(rows, tmp_path / "log.parquet")
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "log.parquet"), pd.DataFrame(rows))


def test_a_training_job_imports_no_pandas():
    """The train rule's script imports (pandas alone is half a second of a job's start-up)."""
    code = (
        "import sys, tying.train.distributed, tying.train.models, tying.rule_script, tying.runtime, tying.train.loop; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'pandas'))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stdout + done.stderr[-2000:]


def test_the_fused_optimizer_steps_as_the_foreach_one(data):
    """build's AdamW runs fused; its updates equal the foreach implementation's to float rounding."""
    s = spec()
    model, tap, opt, sched = build(s, "cpu")
    twin = build(s, "cpu")[0]
    groups = [
        {"params": [p for p in twin.parameters() if p.ndim >= 2], "weight_decay": s.weight_decay},
        {"params": [p for p in twin.parameters() if p.ndim < 2], "weight_decay": 0.0},
    ]
    reference = torch.optim.AdamW(groups, lr=s.lr, betas=(0.9, 0.95), foreach=True)
    torch.optim.lr_scheduler.LambdaLR(reference, lr_lambda(s))  # at step 0's rate, as build's schedule set opt's
    assert opt.defaults["fused"]
    for step in range(1, 4):
        x, y = train_batch(data[0], step, 0, 4, 16)
        for m, o in ((model, opt), (twin, reference)):
            NextTokenLoss(m)(input_ids=x, targets=y).backward()
            o.step()
            o.zero_grad(set_to_none=True)
    for a, b in zip(model.parameters(), twin.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)

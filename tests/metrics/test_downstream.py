"""Table 7's downstream numbers: perplexity on a text, lm-eval accuracies, and the table beside the paper."""

import math
import sys

import pandas as pd
import pytest
import torch
import torch.nn.functional as F
import yaml
from conftest import tiny_model, word_tokenizer
from helpers import needs_lm_eval, write_task
from snakerun import ROOT, planned_jobs, snakemake

from tying.errors import PipelineError
from tying.metrics.downstream import perplexity, text_documents, write_text
from tying.metrics.zero_shot import lm_eval_scores, task_index
from tying.plan.layers import load
from tying.report.tables import table7


def test_perplexity_is_the_mean_cross_entropy_of_non_overlapping_windows():
    model = tiny_model(vocab_size=64).eval()
    ids = torch.randint(0, 64, (16 * 5 + 7,), generator=torch.Generator().manual_seed(0))
    value, count = perplexity(model, ids.numpy(), seq_len=16, batch_size=3)
    nll = []
    with torch.no_grad():
        for window in ids.split(16):
            logits = model(input_ids=window[None]).logits[0, :-1]
            nll += F.cross_entropy(logits, window[1:], reduction="none").tolist()
    assert count == len(nll) == 5 * 15 + 6
    assert value == pytest.approx(math.exp(sum(nll) / len(nll)), rel=1e-5)
    with pytest.raises(PipelineError, match="at least 2 tokens"):
        perplexity(model, ids[:1].numpy(), seq_len=16)


def test_text_documents_are_joined_by_a_blank_line(tmp_path):
    (tmp_path / "a.txt").write_text("  first document\n")
    (tmp_path / "b.jsonl").write_text('{"text": "second"}\n\n{"text": "third"}\n')
    write_text(
        text_documents({"source": "local", "paths": [str(tmp_path / "a.txt"), str(tmp_path / "b.jsonl")]}),
        tmp_path / "text.txt",
    )
    assert (tmp_path / "text.txt").read_text() == "first document\n\nsecond\n\nthird"


def loss_frame():
    return pd.DataFrame(
        [
            {
                "arch": "olmo",
                "variant": v,
                "seed": s,
                "step": step,
                "val_loss": loss,
                "perplexity": math.exp(loss),
                "bigram_loss": 4.0,
                "margin": loss - 4.0,
                "unigram_loss": 6.0,
            }
            for v in ("tied", "tied_x5")
            for s in (0, 1)
            for step, loss in ((0, 9.0), (10, 3.0 + s))
        ]
    )


def test_table7_puts_the_paper_numbers_beside_a_measured_wikitext2_column():
    downstream = pd.DataFrame(
        [
            {"arch": "olmo", "variant": v, "seed": s, "step": 10, "metric": m, "value": x}
            for v in ("tied", "tied_x5")
            for s in (0, 1)
            for m, x in (("WikiText-2 perplexity", 30.0 + s), ("arc_easy acc", 0.4))
        ]
    )
    table = table7(pd.concat([loss_frame(), downstream], ignore_index=True)).set_index("variant")
    assert list(table.columns[:12]) == [
        "arch",
        "val loss",
        "bigram table",
        "val loss - bigram",
        "unigram table",
        "perplexity",
        "WikiText-2 perplexity",
        "WikiText-2 perplexity (paper)",
        "arc_easy acc",
        "interval",
        "n_seeds",
        "val_loss_mean",
    ]
    assert table.loc["tied", "WikiText-2 perplexity (paper)"] == "35.71"
    assert table.loc["tied_x5", "WikiText-2 perplexity (paper)"] == "36.64"
    assert table.loc["tied", "WikiText-2 perplexity_mean"] == pytest.approx(30.5)
    assert table.loc["tied", "arc_easy acc_mean"] == pytest.approx(0.4)
    assert table.loc["tied", "val_loss_mean"] == pytest.approx(3.5)
    # held-out loss alone (the default): the paper's WikiText-2 numbers beside the held-out perplexity
    alone = table7(loss_frame()).set_index("variant")
    assert alone.loc["tied", "perplexity (paper)"] == "35.71 (WikiText-2)"


def save_checkpoint(folder):
    model, tok = tiny_model(vocab_size=64).eval(), word_tokenizer(64)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return model, tok


@needs_lm_eval
def test_lm_eval_accuracy_is_the_share_of_questions_whose_answer_is_most_likely(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    docs = write_task(tmp_path)
    model, tok = save_checkpoint(tmp_path / "model")
    scores = lm_eval_scores(tmp_path / "model", ["tiny_choice"], batch_size=4, include_path=str(tmp_path))
    right = 0
    with torch.no_grad():
        for doc in docs:
            context = tok(doc["question"])["input_ids"]
            logliks = []
            for choice in doc["choices"]:
                cont = tok(" " + choice)["input_ids"]
                x = torch.tensor([context + cont])
                logp = model(input_ids=x[:, :-1]).logits.log_softmax(-1)[0, len(context) - 1 :]
                logliks.append(logp.gather(1, torch.tensor(cont)[:, None]).sum().item())
            right += max(range(len(logliks)), key=logliks.__getitem__) == doc["answer"]
    assert scores["metric"].tolist() == ["tiny_choice acc"]
    assert scores["value"].item() == pytest.approx(right / len(docs))
    with pytest.raises(PipelineError, match="downstream.lm_eval.tasks: unknown to lm-eval: no_such_task"):
        lm_eval_scores(tmp_path / "model", ["no_such_task"], include_path=str(tmp_path))  # lm-eval's own index too


@needs_lm_eval
def test_local_tasks_alone_are_indexed_without_lm_evals_own(tmp_path):
    from lm_eval.tasks import TaskManager

    write_task(tmp_path)
    assert task_index(TaskManager, ["tiny_choice"], str(tmp_path)).all_tasks == ["tiny_choice"]


def test_without_lm_eval_the_job_says_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "lm_eval", None)
    with pytest.raises(PipelineError, match=r"needs lm-eval, the `eval` extra: pip install .*\.\[eval\]"):
        lm_eval_scores(tmp_path, ["arc_easy"])


def test_paper_train_plans_wikitext2_and_lm_eval_for_every_variant_and_the_default_neither(tmp_path):
    paper = load("configs/paper-train.yaml")
    (tmp_path / "paper").mkdir()
    (tmp_path / "default").mkdir()
    jobs = planned_jobs(snakemake(tmp_path / "paper", "-n", "results/tables/table7.csv", config=paper))
    assert jobs["perplexity"] == jobs["lm_eval"] == jobs["train"] == 5 and jobs["downstream_text"] == 1
    assert paper["downstream"]["perplexity"]["label"] == "WikiText-2"
    default = yaml.safe_load((ROOT / "config.yaml").read_text())
    jobs = planned_jobs(snakemake(tmp_path / "default", "-n", config=default))
    assert not {"perplexity", "lm_eval", "downstream_text"} & set(jobs) and jobs["tokens_shard"] == 1

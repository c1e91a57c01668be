"""Claims over training: branch matching, the final point against the claims table, and a released
trajectory built offline from a fake hub cache whose tied matrix turns from input-like to output-like."""

import os
import re
import tempfile

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from hubfixtures import PAPER, _survey_olmo, add_snapshot, word_tokenizer
from snakerun import planned_jobs, snakemake

from tying.checkpoints.embeddings import Embeddings
from tying.claims.claims_over_training import claims_by_point, point_rows
from tying.claims.statistics import claim_statistics
from tying.claims.verdicts import claims_table
from tying.hub import revisions
from tying.metrics.alignment import alignment_frame, scaling_frame
from tying.metrics.evolution import evolution_frames
from tying.metrics.knn_overlap import knn_frame
from tying.tidy import with_ids

ANALYSIS = {"held_out": 0.2, "split_seed": 0}
OPTIONS = {"held_out": 0.2, "seed": 0}  # the same, as alignment_frame and scaling_frame take them


def test_each_grid_point_gets_the_closest_branch_of_each_repository():
    tied = ["main", "step1000-tokens4B", "step2000-tokens8B", "step3000-tokens13B", "step4000-tokens17B"]
    untied = [
        "step0-tokens0B",
        "step2000-tokens4B",
        "step4000-tokens8B",
        "step6000-tokens13B",
        "step8000-tokens17B",
        "step9000",
    ]
    assert revisions.token_grid(4, 17, 4) == [4, 6, 10, 17]
    assert revisions.match_branches(tied, untied, [4, 6, 10, 17]) == [
        {
            "tokens_b": 4,
            "tied": "step1000-tokens4B",
            "tied_tokens_b": 4,
            "untied": "step2000-tokens4B",
            "untied_tokens_b": 4,
        },
        # 6: 4B and 8B are equally close, the lower step wins in both: the same pair as at 4, left out
        {
            "tokens_b": 10,
            "tied": "step2000-tokens8B",
            "tied_tokens_b": 8,
            "untied": "step4000-tokens8B",
            "untied_tokens_b": 8,
        },
        {
            "tokens_b": 17,
            "tied": "step4000-tokens17B",
            "tied_tokens_b": 17,
            "untied": "step8000-tokens17B",
            "untied_tokens_b": 17,
        },
    ]
    assert revisions.token_grid() == [4, 8, 17, 36, 76, 158, 330, 689, 1438, 3000]
    with pytest.raises(revisions.PipelineError, match=r"^the tied repository has no step\{N\}-tokens\{M\}B branch"):
        revisions.match_branches(["main", "step5"], untied, [4])


def _embeddings(g, vocab, width, tied_like=None, a=0.0):
    """Untied random Embeddings, or (tied_like = (input, output)) a tied matrix a mix of the two plus noise."""
    tokens = tuple(f"w{i}" for i in range(vocab))
    if tied_like is None:
        return Embeddings(torch.randn(vocab, width, generator=g), torch.randn(vocab, width, generator=g), False, tokens)
    mix = (1 - a) * tied_like[0] + a * tied_like[1] + 0.5 * torch.randn(vocab, width, generator=g)
    return Embeddings(mix, mix, True, tokens)


def _quality(seed, steps, margins):
    """Quality rows of one seed's three models, `margins[step]` nats from a 4-nat bigram table at each step."""
    frame = pd.DataFrame(
        [
            {
                "pair": "main",
                "seed": seed,
                "role": v,
                "arch": "olmo",
                "variant": v,
                "step": step,
                "val_loss": 4.0 + margins[step] + 0.01 * seed,
                "unigram_loss": 6.0,
                "bigram_loss": 4.0,
                "bigram_weight": 0.8,
            }
            for v in ("tied", "untied", "tied_x5")
            for step in steps
        ]
    )
    return frame.assign(margin=frame["val_loss"] - frame["bigram_loss"])


def test_the_last_point_of_a_trained_pair_is_the_claims_table():
    steps, variants, rows, frames = (0, 10, 20), {"tied": 0.7, "tied_x5": 0.5}, [], {}
    margins = {0: 0.0, 10: 0.2, 20: -0.4}  # the models pass their bigram table between steps 10 and 20
    keep = np.arange(3, 300)  # the analysed tokens: some ids left out, as min_count leaves them
    for seed in range(3):
        g = torch.Generator().manual_seed(seed)
        untied_runs, models = [], {}
        for step in steps:
            untied = _embeddings(g, 300, 16)
            scaled = {
                v: _embeddings(g, 300, 16, (untied.input, untied.output), a * step / 20) for v, a in variants.items()
            }
            models[step] = untied, scaled
            untied_runs.append((step, untied))
        evolution, per_token = (with_ids(f, {"run": "main", "seed": seed}) for f in evolution_frames(untied_runs, keep))
        quality = _quality(seed, steps, margins)
        for step, (untied, scaled) in models.items():
            rows.append(
                point_rows(
                    untied,
                    scaled["tied"],
                    scaled,
                    keep,
                    per_token,
                    quality,
                    analysis=ANALYSIS,
                    k=5,
                    approximate=False,
                    scaled_variant="tied_x5",
                    ids={"pair": "main", "seed": seed, "step": step},
                ).assign(pair="main", seed=seed, point=steps.index(step), step=step, tokens=step * 64)
            )
        untied, scaled = models[steps[-1]]
        ids = {"pair": "main", "seed": seed, "step": steps[-1]}
        final = {  # what the alignment, knn, scaling and evolution jobs write at the final step
            "alignment": with_ids(alignment_frame(untied, scaled["tied"], keep=keep, **OPTIONS), ids),
            "knn": with_ids(knn_frame(untied, scaled["tied"], ks=(5,), keep=keep, null_seed=1), ids),
            "scaling": pd.concat(
                [
                    with_ids(scaling_frame(emb, untied, keep=keep, **OPTIONS), {**ids, "variant": v})
                    for v, emb in scaled.items()
                ]
            ),
            "evolution": evolution,
            "quality": quality,
        }
        for name, frame in final.items():
            frames.setdefault(name, []).append(frame)
    claims = claims_table(claim_statistics(**{n: pd.concat(f) for n, f in frames.items()}, k=5)).set_index("claim")
    table = claims_by_point(pd.concat(rows, ignore_index=True))

    last = table[table["step"] == steps[-1]].set_index("claim")
    assert list(last.index) == ["LM", "C1", "C2", "C4", "C7a", "C7b"]
    assert last.loc["LM", "verdict"] == "holds" and (last["testable"] == "yes").all()
    for column in ("mean", "ci_low", "ci_high"):  # C4 from per-token drifts: equal to float32 rounding
        assert last[column].to_dict() == pytest.approx(claims.loc[last.index, column].to_dict(), rel=1e-6), column
    assert last["verdict"].to_dict() == claims.loc[last.index, "verdict"].to_dict()
    c1 = table[table["claim"] == "C1"].set_index("step")["mean"]
    assert c1[0] < -0.3 < 0.3 < c1[20]  # the planted tied matrix turns from input-like to output-like
    before = table[table["step"] == 10].set_index("claim")  # models still worse than their bigram table
    assert before.loc["LM", "verdict"] == "does not hold"
    assert (before.drop(index="LM")["verdict"] == "not testable here").all()
    assert before.loc["C1", "testable"].startswith("no: language model: LM 0.210")
    assert set(table.loc[table["step"] == 0, "n_seeds"]) == {3}
    assert table.loc[table["claim"] == "C1", "chance_mean"].abs().max() < 0.1


# --- A released trajectory from a fake hub cache --------------------------------------------------------------
TIED_REPO, UNTIED_REPO = "test-org/traj-tied", "test-org/traj-untied"
TIED_BRANCHES = {
    "step1000-tokens4B": 0.0,
    "step2000-tokens8B": 0.5,
    "step3000-tokens13B": 0.75,
    "step4000-tokens17B": 1.0,
}  # branch -> how output-like the tied matrix is
UNTIED_BRANCHES = [
    "step0-tokens0B",
    "step2000-tokens4B",
    "step4000-tokens8B",
    "step6000-tokens13B",
    "step8000-tokens17B",
]


def _trajectory_cache(cache):
    g = torch.Generator().manual_seed(3)
    words = ["[UNK]", *(f"w{i}" for i in range(1, 300))]
    u_in, u_out = torch.randn(300, 16, generator=g), torch.randn(300, 16, generator=g)
    mixing = torch.randn(16, 24, generator=g) / 4
    models = {(UNTIED_REPO, b): _survey_olmo(words, 16, False, u_in, u_out) for b in UNTIED_BRANCHES}
    for branch, a in TIED_BRANCHES.items():
        tied = ((1 - a) * u_in + a * u_out) @ mixing + 0.2 * torch.randn(300, 24, generator=g)
        models[TIED_REPO, branch] = _survey_olmo(words, 24, True, tied)
    for (repo, branch), model in models.items():
        with tempfile.TemporaryDirectory() as model_dir:
            model.save_pretrained(model_dir)
            word_tokenizer(words).save_pretrained(model_dir)
            add_snapshot(cache, repo, branch, model_dir)


def _listed_branches(cache):
    """revisions.branch_names answered from the cache's refs, as the hub would list them."""
    return lambda repo: sorted(p.name for p in (cache / f"models--{repo.replace('/', '--')}" / "refs").iterdir())


@pytest.fixture(scope="module")
def released_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("trajectory")
    _trajectory_cache(root / "cache")
    config = {
        **{k: PAPER[k] for k in ("seeds", "tokenizer", "model", "train", "variants", "architectures")},
        "corpus": {"source": "stdlib"},
        "analysis": {"knn_k": 5},
        "pairs": {"traj": {"tied": {"hub": TIED_REPO}, "untied": {"hub": UNTIED_REPO}, "trajectory": []}},
        "tables": {"claims_over_training": ["traj"]},
    }
    (root / "config.yaml").write_text("# the released trajectory\n" + yaml.safe_dump(config, sort_keys=False))
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(revisions, "branch_names", _listed_branches(root / "cache"))
        revisions.main(
            [
                "match",
                TIED_REPO,
                UNTIED_REPO,
                "--first",
                "4",
                "--last",
                "17",
                "--points",
                "4",
                "--config",
                str(root / "config.yaml"),
                "--pair",
                "traj",
            ]
        )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(root / "cache"), "HF_HOME": str(root / "hf-home")}
    dry = snakemake(root, "-n", "all", env=env)
    result = snakemake(root, "all", env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    return root, dry


def test_match_writes_the_expected_pairs_into_the_config(released_run):
    root, _ = released_run
    text = (root / "config.yaml").read_text()
    assert text.startswith("# the released trajectory\n")
    assert [(p["tied"], p["untied"]) for p in yaml.safe_load(text)["pairs"]["traj"]["trajectory"]] == [
        ("step1000-tokens4B", "step2000-tokens4B"),
        ("step2000-tokens8B", "step4000-tokens8B"),
        ("step4000-tokens17B", "step8000-tokens17B"),
    ]


def test_a_dry_run_plans_one_embeddings_fetch_per_repository_and_branch(released_run):
    _, dry = released_run
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert planned_jobs(dry) == {"hub_embeddings": 6, "trajectory": 1, "claims_over_training": 1, "all": 1}
    fetched = re.findall(
        r"^rule hub_embeddings:\n(?:    .*\n)*?    wildcards: repo=(\S+), revision=(\S+)$", dry.stdout, re.M
    )
    assert sorted(fetched) == sorted(
        [(TIED_REPO, b) for b in ("step1000-tokens4B", "step2000-tokens8B", "step4000-tokens17B")]
        + [(UNTIED_REPO, b) for b in ("step2000-tokens4B", "step4000-tokens8B", "step8000-tokens17B")]
    )


def test_the_released_curve_rises_through_the_planted_change(released_run):
    root, _ = released_run
    table = pd.read_csv(root / "results/tables/claims_over_training.csv")
    assert set(table["claim"]) == {"C1", "C2"}
    c1 = table[table["claim"] == "C1"].set_index("tokens")
    assert list(c1.index) == [4e9, 10e9, 17e9]
    assert list(c1["tied_tokens"]) == [4e9, 8e9, 17e9] and list(c1["untied_tokens"]) == [4e9, 8e9, 17e9]
    assert c1["mean"].iloc[0] < -0.2 and abs(c1["mean"].iloc[1]) < 0.2 and c1["mean"].iloc[2] > 0.2
    assert (c1["ci_low"] < c1["mean"]).all() and (c1["mean"] < c1["ci_high"]).all()
    assert c1["verdict"].iloc[-1] == "holds (one pair of models)"
    assert c1["interval"].str.endswith("one pair of models").all()
    c2 = table[table["claim"] == "C2"]["mean"].to_numpy()
    assert c2[0] < 0 < c2[2]
    assert (root / "figures/claims_over_training.pdf").stat().st_size > 0

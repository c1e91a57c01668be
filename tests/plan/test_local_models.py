"""Local save_pretrained directories as a pair's models: checked before any job, read in place, built offline."""

import copy
import json
import os

import numpy as np
import pandas as pd
import pytest
import torch
from hubfixtures import SMALL, _olmo, _seeded, fake_paper_config, tiny_tokenizer, use_hub_cache, word_tokenizer
from safetensors.torch import save_file
from snakerun import ROOT, snakemake
from transformers import OlmoConfig, OlmoForCausalLM

from tying.checkpoints.embeddings import load_embeddings
from tying.checkpoints.unembedding_hash import matrix_hash, stored_unembedding_hashes
from tying.data.tokenizer import pretrained
from tying.errors import PipelineError
from tying.lens.translators import TunedLens
from tying.lens.tuned_lens_format import save_tuned_lens, unembed_hash
from tying.metrics.knn_overlap import knn_frame
from tying.plan.checks import check
from tying.plan.claims import pair_claims_metrics
from tying.plan.layers import local_paths
from tying.plan.pairs import evolution_models, pair_models
from tying.train.models import frozen_model

SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
# name -> (build(seed) -> model, seed): a tied OLMo, and two checkpoints of an untied one
MODELS = {"tied": (lambda seed: _olmo(seed, tied=True), 6), "untied-step0": (_olmo, 0), "untied": (_olmo, 1)}


def save_model(model, directory):
    model.save_pretrained(directory)
    tiny_tokenizer().save_pretrained(directory)
    return directory


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """{name: directory} of the MODELS, each with its tokenizer."""
    root = tmp_path_factory.mktemp("local-models")
    return {name: save_model(build(seed), root / name) for name, (build, seed) in MODELS.items()}


def local_pair(models, **paths):
    return {
        "tied": {"path": str(paths.get("tied", models["tied"]))},
        "untied": {"path": str(paths.get("untied", models["untied"]))},
        "evolution": {0: str(models["untied-step0"]), 1000: str(models["untied"])},
    }


def local_config(corpus, models, **paths):
    """configs/paper.yaml's miniature (hubfixtures.fake_paper_config) with its one pair `mine` of local directories."""
    config = fake_paper_config(corpus)
    config["pairs"] = {"mine": local_pair(models, **paths)}
    config["figures"] = {"fig1": "mine", "fig2": "mine"}
    config["tables"] = {"table1": ["mine"], "table5": ["mine"], "claims": "mine"}
    return config


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    rng = np.random.default_rng(0)
    docs = [{"text": " ".join(f"t{i}" for i in rng.integers(1, 64, size=120))} for _ in range(24)]
    path = tmp_path_factory.mktemp("local-corpus") / "corpus.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    return path


def checked(config):
    check(config, SCHEMA)
    return config


def test_a_local_pair_reads_its_directories_in_place(models, corpus):
    config = checked(local_config(corpus, models))
    assert pair_models(config, "mine", 0) == {"tied": str(models["tied"]), "untied": str(models["untied"])}
    assert pair_models(config, "mine", 0, full=True)["tied"] == str(models["tied"])  # the lens: the same, whole
    assert evolution_models(config, "mine", 0) == {0: str(models["untied-step0"]), 1000: str(models["untied"])}


def test_relative_paths_are_made_absolute_against_where_snakemake_starts(models, corpus):
    config = local_config(corpus, models)
    config["pairs"]["mine"]["untied"]["path"] = "m/../untied"
    config["pairs"]["mine"]["evolution"] = {0: "untied-step0", 1000: "untied"}
    local_paths(config, str(models["tied"].parent))
    assert config["pairs"]["mine"]["untied"] == {"path": str(models["untied"])}
    assert config["pairs"]["mine"]["evolution"] == {0: str(models["untied-step0"]), 1000: str(models["untied"])}
    assert config["pairs"]["mine"]["tied"] == {"path": str(models["tied"])}  # already absolute: unchanged


def test_a_missing_or_incomplete_or_wrongly_tied_directory_is_one_line(models, corpus, tmp_path):
    empty, no_config = tmp_path / "empty", tmp_path / "no-config"
    empty.mkdir()
    (empty / "config.json").write_text(json.dumps({"model_type": "olmo", "vocab_size": 64}))
    no_config.mkdir()
    (no_config / "model.safetensors").write_bytes((models["tied"] / "model.safetensors").read_bytes())
    cases = [
        ({"untied": tmp_path / "nowhere"}, f"pairs.mine.untied.path: no directory {tmp_path / 'nowhere'}"),
        (
            {"tied": no_config},
            f"pairs.mine.tied.path: {no_config} holds no config.json (not a directory save_pretrained wrote)",
        ),
        (
            {"untied": empty},
            f"pairs.mine.untied.path: {empty}: no weights (model.safetensors or "
            "pytorch_model.bin, or the index of either's shards)",
        ),
        (
            {"untied": models["tied"]},
            f"pairs.mine.untied.path: {models['tied']} is a tied model (config.json's "
            "tie_word_embeddings), but its role needs an untied one",
        ),
        (
            {"tied": models["untied"]},
            f"pairs.mine.tied.path: {models['untied']} is an untied model (config.json's "
            "tie_word_embeddings), but its role needs a tied one",
        ),
    ]
    for paths, message in cases:
        with pytest.raises(PipelineError) as error:
            check(local_config(corpus, models, **paths), SCHEMA)
        assert str(error.value) == message


def test_tying_is_read_from_the_stored_tensors_when_config_json_does_not_state_it(models, corpus, tmp_path):
    untied = tmp_path / "untied"
    save_model(_olmo(1), untied)
    stated = json.loads((untied / "config.json").read_text())
    del stated["tie_word_embeddings"]
    (untied / "config.json").write_text(json.dumps(stated))
    with pytest.raises(PipelineError) as error:
        check(local_config(corpus, models, tied=untied), SCHEMA)
    assert str(error.value) == (
        f"pairs.mine.tied.path: {untied} is an untied model (its stored tensors), but its role needs a tied one"
    )


def test_an_evolution_directory_is_checked_like_a_model(models, corpus):
    config = local_config(corpus, models)
    config["pairs"]["mine"]["evolution"][0] = str(models["tied"])
    with pytest.raises(PipelineError) as error:
        check(config, SCHEMA)
    assert str(error.value) == (
        f"pairs.mine.evolution.0: {models['tied']} is a tied model (config.json's "
        "tie_word_embeddings), but its role needs an untied one"
    )


def test_a_local_pair_names_its_checkpoints_by_directory_not_by_revision(models, corpus):
    config = local_config(corpus, models)
    del config["pairs"]["mine"]["evolution"]
    check(copy.deepcopy(config), SCHEMA)  # its claims table says C4 is not testable here (test_claims_report)
    assert pair_claims_metrics(config, "mine") == ["alignment", "knn", "quality"]
    config["figures"]["fig3"] = "mine"
    with pytest.raises(PipelineError) as error:
        check(copy.deepcopy(config), SCHEMA)
    assert str(error.value) == (
        "figures.fig3: local pair 'mine' has no evolution (training step -> directory of its untied model)"
    )
    del config["figures"]["fig3"]
    config["pairs"]["mine"]["trajectory"] = [
        {"tokens_b": 1, "tied": "a", "untied": "b", "tied_tokens_b": 1, "untied_tokens_b": 1}
    ]
    with pytest.raises(PipelineError) as error:
        check(config, SCHEMA)
    assert str(error.value) == (
        "pairs.mine.trajectory: matched hub revisions; a local pair has none (its evolution "
        "names its checkpoints' directories)"
    )


def bare_copy(model_dir, directory):
    """`model_dir`'s config and weights in `directory`, without its tokenizer."""
    directory.mkdir()
    for name in ("config.json", "model.safetensors"):
        (directory / name).write_bytes((model_dir / name).read_bytes())
    return directory


def test_a_local_model_without_its_tokenizer_ends_at_the_check_naming_the_folder(models, corpus, tmp_path):
    bare = bare_copy(models["untied"], tmp_path / "untied")
    with pytest.raises(PipelineError) as error:
        check(local_config(corpus, models, untied=bare), SCHEMA)
    assert str(error.value) == (
        f"pairs.mine.untied.path: {bare} holds no tokenizer.json, the model's tokenizer (save "
        "the model's tokenizer there with tokenizer.save_pretrained(DIR), or name a folder "
        "holding one with tokenizer: DIR beside path)"
    )
    (bare / "vocab.json").write_text("{}")
    with pytest.raises(
        PipelineError,
        match=r"holds no tokenizer.json, the model's tokenizer \(only vocab.json: "
        r"AutoTokenizer.from_pretrained\(DIR\).save_pretrained\(DIR\) "
        r"writes it\)$",
    ):
        check(local_config(corpus, models, untied=bare), SCHEMA)
    config = local_config(corpus, models, untied=bare)
    config["pairs"]["mine"]["untied"]["tokenizer"] = str(tmp_path)  # a folder that holds no tokenizer either
    with pytest.raises(PipelineError, match=rf"^pairs.mine.untied.tokenizer: {tmp_path} holds no tokenizer.json"):
        check(config, SCHEMA)
    config["pairs"]["mine"]["untied"]["tokenizer"] = str(models["untied"])  # one that does
    check(config, SCHEMA)
    config["pairs"]["mine"]["evolution"][0] = str(bare_copy(models["untied-step0"], tmp_path / "step0"))
    check(config, SCHEMA)  # the untied model's checkpoints read its tokenizer folder too


def test_tokenizer_errors_say_where_the_tokenizer_was_looked_for_and_keep_the_cause(tmp_path, monkeypatch):
    use_hub_cache(monkeypatch, tmp_path / "empty-cache")
    with pytest.raises(PipelineError) as error:
        pretrained(str(tmp_path))
    assert str(error.value).startswith(f"cannot load the tokenizer in the local folder {tmp_path}: ")
    assert "from the hub" not in str(error.value) and len(str(error.value).split(": ", 2)[2]) > 10  # the cause said
    with pytest.raises(PipelineError) as error:
        pretrained("no-org/no-model")
    assert str(error.value).startswith("cannot load the tokenizer 'no-org/no-model' from the hub: OSError: ")


def test_the_check_counts_the_token_strings_a_pair_shares_and_refuses_too_few(models, corpus, tmp_path):
    padded = tmp_path / "padded"  # the same tokenizer, 96 rows
    save_model(
        _seeded(
            OlmoForCausalLM,
            OlmoConfig(
                **{**SMALL, "vocab_size": 96},
                hidden_size=32,
                intermediate_size=64,
                num_hidden_layers=2,
                num_attention_heads=4,
                tie_word_embeddings=False,
            ),
            1,
        ),
        padded,
    )
    assert check(local_config(corpus, models, untied=padded), SCHEMA) == [
        "pair 'mine': its models share 64 token strings (tied 64 tokens in 64 rows; untied 64 tokens in 96 rows); "
        "every table of the pair compares them on those"
    ]
    other = tmp_path / "other"  # '[UNK]', t1 ... t19 in common, then strings of its own
    _olmo(1).save_pretrained(other)
    words = ["[UNK]", *(f"t{i}" for i in range(1, 20)), *(f"u{i}" for i in range(20, 64))]
    word_tokenizer(words).save_pretrained(other)
    message = (
        "pairs.mine: its models share 20 token strings (tied 64 tokens in 64 rows; untied 64 tokens in 64 "
        "rows), fewer than the {} the analyses need (analysis.min_shared_tokens, and knn_k + 1)"
    )
    with pytest.raises(PipelineError) as error:
        check(local_config(corpus, models, untied=other), SCHEMA)
    assert str(error.value) == message.format(50)
    config = local_config(corpus, models, untied=other)
    config["analysis"] |= {"min_shared_tokens": 20, "knn_k": 19}
    assert check(copy.deepcopy(config), SCHEMA)[0].startswith("pair 'mine': its models share 20 token strings")
    config["analysis"]["knn_k"] = 20  # never fewer than knn_k + 1
    with pytest.raises(PipelineError) as error:
        check(config, SCHEMA)
    assert str(error.value) == message.format(21)


@pytest.mark.parametrize("rows, dtype", [(20, torch.float32), (1000, torch.bfloat16), (64, torch.float16)])
def test_the_stored_unembedding_hash_is_tuned_lenss_hash_of_the_loaded_matrix(tmp_path, rows, dtype):
    """From the file's corner rows alone: a matrix numpy prints whole (20 x 32) and ones it prints as corners, in
    float32, bfloat16 and float16 files, as a model loaded in each dtype holds them."""
    generator = torch.Generator().manual_seed(rows)
    head, embed = (torch.randn(rows, 32, generator=generator).mul(4).to(dtype) for _ in range(2))
    save_file({"model.embed_tokens.weight": embed, "lm_head.weight": head}, tmp_path / "model.safetensors")
    (tmp_path / "config.json").write_text(json.dumps({"vocab_size": rows}))
    hashes = stored_unembedding_hashes(tmp_path, tied=False)
    for loaded in (torch.float32, torch.bfloat16, torch.float16):
        assert hashes[str(loaded).removeprefix("torch.")] == matrix_hash(head.to(loaded).float().numpy())
    assert stored_unembedding_hashes(tmp_path, tied=True)["float32"] == matrix_hash(embed.float().numpy())
    assert hashes["float32"] != matrix_hash(embed.float().numpy())


def test_a_lens_for_another_model_of_the_same_shape_ends_at_the_check(models, corpus, tmp_path):
    for role in ("tied", "untied"):
        model = frozen_model(models[role])
        save_tuned_lens(TunedLens(2, 32), model, tmp_path / role, base_model=str(models[role]))
        assert unembed_hash(model) == stored_unembedding_hashes(models[role], tied=role == "tied")["float32"]
    config = local_config(corpus, models)
    config["pairs"]["mine"]["lens"] = {"tied": str(tmp_path / "tied"), "untied": str(tmp_path / "untied")}
    check(copy.deepcopy(config), SCHEMA)
    config["pairs"]["mine"]["lens"]["tied"] = str(tmp_path / "untied")  # the untied model's lens: 32 wide, 2 layers
    with pytest.raises(PipelineError) as error:
        check(config, SCHEMA)
    assert str(error.value) == (
        f"pairs.mine.lens.tied: {tmp_path / 'untied'} is a lens for another model's "
        f"unembedding (its unembed_hash is not that of {models['tied']}'s output matrix)"
    )


def test_knn_k_is_checked_against_a_local_models_vocabulary(models, corpus):
    config = local_config(corpus, models)
    config["analysis"]["knn_k"] = 64
    with pytest.raises(PipelineError) as error:
        check(config, SCHEMA)
    assert str(error.value) == (
        "analysis.knn_k: 64 neighbours of each token, but pair 'mine' has 64 tokens (its "
        "config.json's vocab_size); give fewer"
    )
    config["analysis"]["knn_k"] = 63
    check(config, SCHEMA)


def test_a_sharded_directory_reads_as_one_file_and_a_missing_shard_is_one_line(models, corpus, tmp_path):
    sharded = tmp_path / "untied-sharded"
    _olmo(1).save_pretrained(sharded, max_shard_size="20KB")
    tiny_tokenizer().save_pretrained(sharded)
    shards = sorted(p.name for p in sharded.glob("model-*.safetensors"))
    assert len(shards) > 2 and (sharded / "model.safetensors.index.json").is_file()
    whole, parts = load_embeddings(models["untied"]), load_embeddings(sharded)
    assert torch.equal(whole.input, parts.input) and torch.equal(whole.output, parts.output) and not parts.tied
    check(local_config(corpus, models, untied=sharded), SCHEMA)
    (sharded / shards[-1]).unlink()
    with pytest.raises(PipelineError) as error:
        check(local_config(corpus, models, untied=sharded), SCHEMA)
    assert str(error.value) == (
        f"pairs.mine.untied.path: {sharded / 'model.safetensors.index.json'}: names "
        f"{shards[-1]}, which is not there"
    )


@pytest.mark.parametrize("zip_format", [True, False])
def test_embeddings_of_a_pytorch_model_bin_directory(tmp_path, zip_format):
    """A directory holding only pytorch_model.bin (torch's zip format, memory-mapped, or the legacy one) reads
    as its safetensors would."""
    model = _olmo(1)
    model.config.save_pretrained(tmp_path)
    tiny_tokenizer().save_pretrained(tmp_path)
    state = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    torch.save(state, tmp_path / "pytorch_model.bin", _use_new_zipfile_serialization=zip_format)
    embeddings = load_embeddings(tmp_path)
    assert not embeddings.tied and embeddings.input.shape == (64, 32)
    assert torch.equal(embeddings.input, state["model.embed_tokens.weight"])
    assert torch.equal(embeddings.output, state["lm_head.weight"])
    assert not torch.equal(embeddings.input, embeddings.output)


@pytest.fixture(scope="module")
def local_run(models, corpus, tmp_path_factory):
    """The miniature built offline on the local pair, its untied model named relative to the run directory."""
    workdir = tmp_path_factory.mktemp("local-run")
    os.symlink(models["untied"], workdir / "untied")
    tokenizer = workdir / "tied-tokenizer"  # the tied model's tokenizer in a folder of its own (`tokenizer:`)
    tiny_tokenizer().save_pretrained(tokenizer)
    config = local_config(corpus, models, untied="untied", tied=bare_copy(models["tied"], workdir / "tied"))
    config["pairs"]["mine"]["tied"]["tokenizer"] = str(tokenizer)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(workdir / "empty-cache")}
    result = snakemake(workdir, "all", config=config, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    shared = "pair 'mine': its models share 64 token strings (tied 64 tokens in 64 rows; untied 64 tokens in 64 rows)"
    assert result.stderr.count(shared) == 1  # said once, by the snakemake that plans
    return workdir


def test_a_local_pair_builds_figures_1_and_2_tables_1_and_5_and_the_claims_offline(local_run, models):
    for target in (
        "figures/fig1.pdf",
        "figures/fig2.pdf",
        "results/tables/table1.csv",
        "results/tables/table5.csv",
        "results/tables/claims.md",
    ):
        assert (local_run / target).stat().st_size > 0, target
    assert not (local_run / "results/hub").exists()  # read in place: nothing fetched, nothing copied
    table1 = pd.read_csv(local_run / "results/tables/table1.csv")
    assert set(table1["pair"]) == {"mine"} and table1["interval"].str.endswith("one pair of models").all()
    # The KNN metric is the local models' own, as load_embeddings reads their directories.
    knn = pd.read_parquet(local_run / "results/metrics/knn/mine/seed0.parquet")
    expected = knn_frame(load_embeddings(models["untied"]), load_embeddings(models["tied"]), ks=(5,), null_seed=1)
    merged = knn.merge(expected, on=["comparison", "k", "token_id"], suffixes=("", "_expected"))
    assert len(merged) == len(expected) > 0 and (merged["n_tokens"] == 64).all()
    assert (merged["overlap"] == merged["overlap_expected"]).all()
    claims = pd.read_parquet(local_run / "results/tables/claims.parquet").set_index("claim")
    assert list(claims.index) == ["LM", "C1", "C2", "C3", "C3s0", "C4", "C5", "C5p", "C6a", "C6b", "C6c", "C7a", "C7b"]
    assert "commits" not in claims.columns


def test_a_local_pairs_claims_test_its_models_against_the_bigram_table_and_say_what_they_cannot_measure(
    local_run, models
):
    """The LM row: each model's loss on the lens's validation windows of the corpus in its own tokenizer (written
    out here from its own logits) against the corpus's bigram table; random tiny models do not beat it, so the
    claims that need a language model are not testable here, and those that need the training say so."""
    quality = pd.read_parquet(local_run / "results/metrics/local_quality/mine/seed0.parquet").set_index("role")
    tokens = local_run / "results/local/tokens" / str(local_run / "untied").lstrip("/")
    meta = json.loads((tokens / "meta.json").read_text())
    val = torch.from_numpy(np.fromfile(tokens / "val.bin", dtype=meta["dtype"]).astype(np.int64))
    windows = (len(val) - 1) // 16  # lens: seq_len 16, batch_size 2, eval_batches 2: the first 4 windows
    x, y = (val[i : i + min(4, windows) * 16].reshape(-1, 16) for i in (0, 1))
    with torch.no_grad():
        logits = OlmoForCausalLM.from_pretrained(models["untied"]).eval()(input_ids=x).logits
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), y.flatten()).item()
    assert quality.loc["untied", "val_loss"] == pytest.approx(loss, rel=1e-5)
    assert (quality["margin"] == quality["val_loss"] - quality["bigram_loss"]).all()
    assert (quality["variant"] == "local").all() and (quality["step"] == 0).all()
    claims = pd.read_parquet(local_run / "results/tables/claims.parquet").set_index("claim")
    assert claims.loc["LM", "mean"] == pytest.approx(quality["margin"].max()) and claims.loc["LM", "mean"] > 0
    assert claims.loc["LM", "verdict"] == "direction only (one pair of models)"
    for cid in ("C1", "C2", "C4"):
        assert claims.loc[cid, "verdict"] == "not testable here"
        assert claims.loc[cid, "testable"].startswith("no: language model: LM ")
    assert claims.loc["C5", "testable"] == (
        "no: no training run here: the tied model's gradient over its first steps is the training's"
    )
    assert claims.loc["C6b", "verdict"] == "not testable here" and claims.loc["C6b", "testable"].startswith(
        "no: no training data here"
    )
    assert claims.loc["C7a", "needs"] == "models beyond the bigram table (LM holds)"


def test_the_lens_of_a_local_model_reads_the_corpus_in_its_own_tokenizer(local_run):
    tokens = local_run / "results/local/tokens" / str(local_run / "untied").lstrip("/")
    meta = json.loads((tokens / "meta.json").read_text())
    documents = pd.read_parquet(local_run / "results/corpus/shard0.parquet")
    expected = [
        i
        for text in documents.loc[documents["split"] == "train", "text"]
        for i in [*(int(word[1:]) for word in text.split()), 0]
    ]  # t{i} -> i, each document ends in EOS 0
    assert np.fromfile(tokens / "train.bin", dtype=meta["dtype"]).tolist() == expected
    lens = pd.read_parquet(local_run / "results/metrics/lens/mine/untied/seed0.parquet")
    assert sorted(lens["layer"].unique()) == [0, 1, 2]

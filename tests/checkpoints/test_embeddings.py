import json

import pytest
import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer
from tokenizers.models import WordLevel

from tying.checkpoints.embeddings import common_vocabulary, load_embeddings, read_tokens, shared_tokens
from tying.errors import PipelineError

WORDS = ["[UNK]", "the", "a", "cat", "dog", "sat", "on", "mat", "ran", "far"]


def write_tokenizer(path, words, added=()):
    tok = Tokenizer(WordLevel({w: i for i, w in enumerate(words)}, unk_token=words[0]))
    tok.add_special_tokens(list(added))
    tok.save(str(path / "tokenizer.json"))
    (path / "tokenizer_config.json").write_text("{}")


def write_model(path, tensors, config, words=WORDS):
    path.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(path / "model.safetensors"))
    (path / "config.json").write_text(json.dumps(config))
    write_tokenizer(path, words)
    return path


def test_olmo_layout_padded_rows_are_trimmed_and_read_as_float32(tmp_path):
    emb_in, emb_out = torch.randn(16, 4), torch.randn(16, 4)
    d = write_model(
        tmp_path / "olmo",
        {"model.embed_tokens.weight": emb_in.bfloat16(), "lm_head.weight": emb_out.bfloat16()},
        {"tie_word_embeddings": False},
    )
    e = load_embeddings(d)
    assert not e.tied and e.input is not e.output
    assert e.input.shape == (10, 4) and e.input.dtype == torch.float32
    assert torch.equal(e.input, emb_in.bfloat16().float()[:10])
    assert torch.equal(e.output, emb_out.bfloat16().float()[:10])
    assert e.tokens == tuple(WORDS)


def test_gpt_neox_layout(tmp_path):
    emb_in, emb_out = torch.randn(12, 3), torch.randn(12, 3)
    d = write_model(tmp_path / "neox", {"gpt_neox.embed_in.weight": emb_in, "embed_out.weight": emb_out}, {})
    e = load_embeddings(d)
    assert not e.tied
    assert torch.equal(e.input, emb_in[:10]) and torch.equal(e.output, emb_out[:10])


def test_gpt_neo_tied_layout_returns_one_tensor(tmp_path):
    wte = torch.randn(10, 3)
    d = write_model(tmp_path / "neo", {"transformer.wte.weight": wte}, {"tie_word_embeddings": True})
    e = load_embeddings(d)
    assert e.tied and e.input is e.output
    assert torch.equal(e.input, wte)


def test_config_tied_ignores_a_stored_output_copy(tmp_path):
    d = write_model(
        tmp_path / "qwen",
        {"model.embed_tokens.weight": torch.randn(10, 3), "lm_head.weight": torch.randn(10, 3)},
        {"tie_word_embeddings": True},
    )
    e = load_embeddings(d)
    assert e.tied and e.input is e.output


def test_sharded_checkpoint(tmp_path):
    d = tmp_path / "sharded"
    d.mkdir()
    emb_in, emb_out = torch.randn(10, 3), torch.randn(10, 3)
    save_file(
        {"model.embed_tokens.weight": emb_in, "model.norm.weight": torch.ones(3)},
        str(d / "model-00001-of-00002.safetensors"),
    )
    save_file({"lm_head.weight": emb_out}, str(d / "model-00002-of-00002.safetensors"))
    weight_map = {
        "model.embed_tokens.weight": "model-00001-of-00002.safetensors",
        "model.norm.weight": "model-00001-of-00002.safetensors",
        "lm_head.weight": "model-00002-of-00002.safetensors",
    }
    (d / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    (d / "config.json").write_text(json.dumps({"tie_word_embeddings": False}))
    write_tokenizer(d, WORDS)
    e = load_embeddings(d)
    assert torch.equal(e.input, emb_in) and torch.equal(e.output, emb_out)


def test_save_pretrained_models_load(tmp_path):
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM, OlmoConfig, OlmoForCausalLM

    small = dict(vocab_size=16, hidden_size=8, intermediate_size=16, num_hidden_layers=1, num_attention_heads=2)
    olmo = OlmoForCausalLM(OlmoConfig(tie_word_embeddings=True, **small))
    neox = GPTNeoXForCausalLM(GPTNeoXConfig(tie_word_embeddings=False, **small))
    for name, model in (("olmo", olmo), ("neox", neox)):
        model.save_pretrained(tmp_path / name)
        write_tokenizer(tmp_path / name, WORDS)
    e = load_embeddings(tmp_path / "olmo")
    assert e.tied and e.input is e.output
    assert torch.allclose(e.input, olmo.get_input_embeddings().weight.detach()[:10])
    e = load_embeddings(tmp_path / "neox")
    assert not e.tied
    assert torch.allclose(e.output, neox.get_output_embeddings().weight.detach()[:10])


def test_added_tokens_count_towards_the_vocabulary(tmp_path):
    write_tokenizer(tmp_path, WORDS, added=["<|endoftext|>"])
    tokens = read_tokens(tmp_path / "tokenizer.json")
    assert len(tokens) == 11 and tokens[10] == "<|endoftext|>"


def test_shared_tokens_of_two_tokenizers(tmp_path):
    other = ["[UNK]", "dog", "zebra", "the", "far", "moon"]
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    write_tokenizer(tmp_path / "a", WORDS)
    write_tokenizer(tmp_path / "b", other)
    idx_a, idx_b = shared_tokens(
        read_tokens(tmp_path / "a" / "tokenizer.json"), read_tokens(tmp_path / "b" / "tokenizer.json")
    )
    # [UNK]: 0<->0, the: 1<->3, dog: 4<->1, far: 9<->4, in increasing idx_a.
    assert idx_a.tolist() == [0, 1, 4, 9]
    assert idx_b.tolist() == [0, 3, 1, 4]


def test_common_vocabulary_keeps_tying_and_reports_ids(tmp_path):
    a = write_model(tmp_path / "a", {"transformer.wte.weight": torch.randn(10, 3)}, {"tie_word_embeddings": True})
    b = write_model(
        tmp_path / "b",
        {"gpt_neox.embed_in.weight": torch.randn(4, 3), "embed_out.weight": torch.randn(4, 3)},
        {},
        words=["[UNK]", "moon", "cat", "the"],
    )
    ea, eb = load_embeddings(a), load_embeddings(b)
    sa, sb, ids = common_vocabulary(ea, eb)
    assert ids.tolist() == [0, 1, 3]
    assert sa.tied and sa.input is sa.output and sa.tokens == ("[UNK]", "the", "cat")
    assert torch.equal(sa.input, ea.input[[0, 1, 3]]) and torch.equal(sb.output, eb.output[[0, 3, 2]])


def test_missing_pieces_are_pipeline_errors(tmp_path):
    with pytest.raises(PipelineError, match="config.json"):
        load_embeddings(tmp_path)
    d = write_model(tmp_path / "x", {"some.other.weight": torch.randn(10, 3)}, {})
    with pytest.raises(PipelineError, match="no known input-embedding"):
        load_embeddings(d)
    d = write_model(tmp_path / "y", {"model.embed_tokens.weight": torch.randn(10, 3)}, {"tie_word_embeddings": False})
    with pytest.raises(PipelineError, match="untied but no output projection"):
        load_embeddings(d)
    d = write_model(tmp_path / "z", {"model.embed_tokens.weight": torch.randn(5, 3)}, {"tie_word_embeddings": True})
    with pytest.raises(PipelineError, match="fewer than"):
        load_embeddings(d)


def class_default_config(config_class, **kwargs):
    """config.json as a hub repository ships it: the model_type, no tie_word_embeddings key."""
    config = config_class(vocab_size=10, hidden_size=4, **kwargs).to_dict()
    config.pop("tie_word_embeddings", None)
    return config


def test_an_unstated_tie_follows_the_model_types_class_default(tmp_path):
    """GPT-Neo ties by its class default: a stored lm_head copy is ignored, as transformers ignores it."""
    from transformers import GPTNeoConfig, GPTNeoXConfig

    wte = torch.randn(10, 4)
    neo = write_model(
        tmp_path / "neo",
        {"transformer.wte.weight": wte, "lm_head.weight": torch.randn(10, 4)},
        class_default_config(GPTNeoConfig, num_layers=1, num_heads=2, attention_types=[[["global"], 1]]),
    )
    e = load_embeddings(neo)
    assert e.tied and e.input is e.output and torch.equal(e.input, wte)
    neox_config = class_default_config(GPTNeoXConfig, num_attention_heads=2)
    emb_in, emb_out = torch.randn(10, 4), torch.randn(10, 4)
    neox = write_model(
        tmp_path / "neox", {"gpt_neox.embed_in.weight": emb_in, "embed_out.weight": emb_out}, neox_config
    )
    e = load_embeddings(neox)
    assert not e.tied and torch.equal(e.output, emb_out)
    half = write_model(tmp_path / "half", {"gpt_neox.embed_in.weight": emb_in}, neox_config)
    with pytest.raises(PipelineError, match="config says untied but no output projection is stored"):
        load_embeddings(half)


def test_matrix_rows_keep_the_padding_rows_with_no_token(tmp_path):
    emb_in, emb_out = torch.randn(16, 4), torch.randn(16, 4)
    d = write_model(
        tmp_path / "olmo",
        {"model.embed_tokens.weight": emb_in, "lm_head.weight": emb_out},
        {"tie_word_embeddings": False},
    )
    e = load_embeddings(d, rows="matrix")
    assert torch.equal(e.input, emb_in) and torch.equal(e.output, emb_out)
    assert e.tokens == (*WORDS, *[None] * 6)
    assert load_embeddings(d, rows="tokenizer").tokens == tuple(WORDS)
    tied = write_model(tmp_path / "tied", {"model.embed_tokens.weight": emb_in}, {"tie_word_embeddings": True})
    e = load_embeddings(tied, rows="matrix")
    assert e.tied and e.input is e.output and e.input.shape == (16, 4)
    with pytest.raises(PipelineError, match="^rows must be one of tokenizer, matrix, got 'all'$"):
        load_embeddings(d, rows="all")


def test_one_tokenizer_with_different_padded_row_counts_is_compared_by_id():
    # Qwen2.5-0.5B stores 151,936 rows and Qwen2.5-7B 152,064 for one tokenizer of 151,665 ids (rows: matrix).
    from tying.checkpoints.embeddings import Embeddings
    from tying.metrics.alignment import alignment_frame
    from tying.metrics.knn_overlap import knn_frame

    def padded(rows, real, seed):
        g = torch.Generator().manual_seed(seed)
        return tuple(f"t{i}" for i in range(real)) + (None,) * (rows - real), torch.randn(rows, 2, generator=g)

    tokens_a, a = padded(151_936, 151_665, 0)
    tokens_b, b = padded(152_064, 151_665, 1)
    small, large = Embeddings(a, a, True, tokens_a), Embeddings(b, b.flip(0)[:152_064], False, tokens_b)
    s, t, ids = common_vocabulary(large, small)
    assert torch.equal(ids, torch.arange(151_936)) and torch.equal(t.input, a) and torch.equal(s.input, b[:151_936])
    frame = alignment_frame(large, small, maps=("linear",), held_out=0.0)
    assert not frame["cross_tokenizer"].any() and (frame["n_tokens"] == 151_936).all()
    (tokens_c, c), (tokens_d, d) = padded(350, 300, 2), padded(400, 300, 3)
    knn = knn_frame(Embeddings(d, d.flip(0), False, tokens_d), Embeddings(c, c, True, tokens_c), ks=(5,))
    assert not knn["cross_tokenizer"].any() and knn["token_id"].max() == 349
    other = Embeddings(c, c, True, ("x",) + tokens_c[1:])  # one string differs: two tokenizers
    assert knn_frame(Embeddings(d, d.flip(0), False, tokens_d), other, ks=(5,))["cross_tokenizer"].all()

"""Hostile checkpoints are refused before anything is built or read, quickly, with a clear message:
configs that claim absurd sizes or NaN and infinite numbers, weights whose headers do not match the
config, shard paths that leave the checkpoint, pickles renamed to .safetensors, and paths no file
system accepts."""

from __future__ import annotations

import json
import math
import re
from types import SimpleNamespace

import pytest
import torch
from conftest import HF_CONFIGS, make_hf_checkpoint, refusal

import explorer
from explorer.engine.model import Transformer
from explorer.errors import CheckpointError
from explorer.loading import folders, weights


def copy_checkpoint(source, target, **config_changes):
    """`source`'s files in `target`, config.json changed by `config_changes`."""
    target.mkdir(parents=True, exist_ok=True)
    for file in source.iterdir():
        (target / file.name).write_bytes(file.read_bytes())
    config = json.loads((source / "config.json").read_text())
    (target / "config.json").write_text(json.dumps({**config, **config_changes}))
    return target


@pytest.fixture
def nothing_is_built(monkeypatch):
    """Fail the test if a model is built or a weight is read."""

    def refuse(*args, **kwargs):
        raise AssertionError("a model was built or weights were read before the checkpoint was refused")

    monkeypatch.setattr(weights, "Transformer", refuse)
    monkeypatch.setattr(folders, "load_file", refuse)


def test_a_million_layer_config_is_refused_with_nothing_built(tmp_path, gqa_checkpoint, nothing_is_built):
    message = refusal(copy_checkpoint(gqa_checkpoint, tmp_path / "deep", num_hidden_layers=10**6))
    assert "n_layers is 1,000,000; this engine reads at most 256" in message


@pytest.mark.parametrize(
    "change, expected",
    [
        (dict(hidden_size=1 << 20), "hidden_size is 1,048,576"),
        (dict(num_attention_heads=4096, num_key_value_heads=4096), "n_heads is 4,096"),
        (dict(vocab_size=10**9), "vocab_size is 1,000,000,000"),
        (dict(max_position_embeddings=10**12), "max_position_embeddings is 1,000,000,000,000"),
        (dict(intermediate_size=10**7), "intermediate_size is 10,000,000"),
        (dict(num_hidden_layers=4.5), "n_layers must be a whole number, got 4.5"),
        (dict(num_hidden_layers="4"), "n_layers must be a whole number, got '4'"),
        (dict(hidden_size=True), "hidden_size must be a whole number, got True"),
        (dict(rms_norm_eps="tiny"), "rms_norm_eps must be a finite number in (1e-30, 1], got 'tiny'"),
    ],
)
def test_sizes_out_of_bounds_or_not_whole_numbers_are_refused_by_name(
    tmp_path, gqa_checkpoint, nothing_is_built, change, expected
):
    message = refusal(copy_checkpoint(gqa_checkpoint, tmp_path / "bad", **change))
    assert expected in message


@pytest.mark.parametrize(
    "change, expected",
    [
        (
            dict(rope_parameters=dict(rope_type="default", rope_theta=math.nan)),
            "rope_theta must be a finite number in (1, 1e12], got nan",
        ),
        (dict(rms_norm_eps=math.inf), "rms_norm_eps must be a finite number in (1e-30, 1], got inf"),
        (
            dict(rope_parameters=dict(rope_type="default", rope_theta=10**400)),
            "rope_theta must be a finite number in (1, 1e12], got 10,000,000,000",
        ),
        (
            dict(rope_theta=-math.inf, rope_parameters=None),
            "rope_theta must be a finite number in (1, 1e12], got -inf",
        ),
        (dict(rms_norm_eps=0), "rms_norm_eps must be a finite number in (1e-30, 1], got 0"),
        (
            dict(rope_parameters=dict(rope_type="linear", rope_theta=1e4, factor=math.nan)),
            "rope scaling factor must be a finite number in (0.001, 1e6], got nan",
        ),
        (
            dict(
                rope_parameters=dict(
                    rope_type="llama3",
                    factor=8.0,
                    low_freq_factor=-math.inf,
                    high_freq_factor=4.0,
                    original_max_position_embeddings=64,
                )
            ),
            "rope scaling low_freq_factor must be a finite number in (0.001, 1e6], got -inf",
        ),
        (
            dict(
                rope_parameters=dict(
                    rope_type="llama3",
                    factor=8.0,
                    low_freq_factor=1.0,
                    high_freq_factor=4.0,
                    original_max_position_embeddings=math.nan,
                )
            ),
            "original_max_position_embeddings must be a whole number, got nan",
        ),
    ],
)
def test_nan_and_infinite_config_json_numbers_are_refused_by_name(
    tmp_path, gqa_checkpoint, nothing_is_built, change, expected
):
    """json writes NaN and Infinity as literals, and json.loads reads them back."""
    message = refusal(copy_checkpoint(gqa_checkpoint, tmp_path / "nan", **change))
    assert expected in message and len(message.removeprefix(str(tmp_path))) < 200


@pytest.fixture(scope="module")
def gemma3_checkpoint(tmp_path_factory, tiny_tokenizer):
    """A seeded Gemma 3 text checkpoint (sliding, full, sliding layers; window 5), on disk."""
    model_type, overrides = HF_CONFIGS["gemma3-sliding"]
    directory = tmp_path_factory.mktemp("gemma3-source")
    make_hf_checkpoint(directory, tiny_tokenizer, model_type, **overrides)
    return directory


@pytest.mark.parametrize(
    "change, expected",
    [
        # counted before anything is built for each layer (it built 10¹² layer types, growing without bound)
        (
            dict(num_hidden_layers=10**12, layer_types=None),
            "n_layers is 1,000,000,000,000; this engine reads at most 256",
        ),
        (
            dict(layer_types=None, sliding_window_pattern=0),
            "sliding_window_pattern must be a whole number from 1 to 256, got 0",
        ),
        (
            dict(layer_types=None, sliding_window_pattern="6"),
            "sliding_window_pattern must be a whole number from 1 to 256, got '6'",
        ),
        (dict(sliding_window=math.inf), "sliding_window must be a whole number, got inf"),
        (dict(rope_parameters=[1, 2]), "rope_parameters must be a JSON object, got [1, 2]"),
        (
            dict(rope_parameters={"full_attention": "fast", "sliding_attention": {"rope_theta": 1e4}}),
            "rope_parameters['full_attention'] must be a JSON object, got 'fast'",
        ),
        (
            dict(layer_types=[["sliding_attention"]] * 3),
            "layer_types must name 3 layers, each 'sliding_attention' or 'full_attention', got ([",
        ),
        (dict(layer_types="sliding"), "layer_types must be a list, got 'sliding'"),
        (
            dict(query_pre_attn_scalar=1e-300),
            "query_pre_attn_scalar must be a finite number in (0.001, 1e6], got 1e-300",
        ),
        (
            dict(final_logit_softcapping=1e-300),
            "final_logit_softcapping must be a finite number in (0.001, 1e6], got 1e-300",
        ),
    ],
)
def test_hostile_gemma3_configs_are_refused_naming_the_value(
    tmp_path, gemma3_checkpoint, nothing_is_built, change, expected
):
    message = refusal(copy_checkpoint(gemma3_checkpoint, tmp_path / "gemma3", **change))
    assert expected in message
    assert len(message.removeprefix(str(tmp_path))) < 200


def test_a_llama_configs_rope_scaling_that_is_no_object_is_refused_by_name(
    tmp_path, gqa_checkpoint, nothing_is_built
):
    message = refusal(copy_checkpoint(gqa_checkpoint, tmp_path / "list", rope_scaling=["linear", 2]))
    assert "rope_scaling must be a JSON object, got ['linear', 2]" in message


def test_numbers_just_inside_their_ranges_give_finite_logits(tmp_path, gemma3_checkpoint):
    """The lower bounds are where float32 stops computing: each number just above its bound still runs."""
    edge = dict(query_pre_attn_scalar=1.1e-3, final_logit_softcapping=1.1e-3, rms_norm_eps=1.1e-30)
    run = explorer.load(copy_checkpoint(gemma3_checkpoint, tmp_path / "edge", **edge), device="cpu").run(
        "To be, or not"
    )
    assert torch.isfinite(run.logits).all()
    assert torch.isfinite(run.attention(0).probs).all()


def test_a_4001_digit_layer_count_is_quoted_briefly(tmp_path, gqa_checkpoint, nothing_is_built):
    message = refusal(copy_checkpoint(gqa_checkpoint, tmp_path / "deep", num_hidden_layers=10**4000))
    assert "n_layers is 10,000,000,000,000,000,0… (4,001 digits); this engine reads at most 256" in message
    assert len(message.removeprefix(str(tmp_path))) < 200


def test_a_config_that_disagrees_with_the_safetensors_headers_is_refused_before_any_weight_is_read(
    tmp_path, gqa_checkpoint, nothing_is_built
):
    message = refusal(copy_checkpoint(gqa_checkpoint, tmp_path / "deeper", num_hidden_layers=200))
    assert "The weights do not fit the config: missing 'model.layers.1" in message
    message = refusal(copy_checkpoint(gqa_checkpoint, tmp_path / "wider", intermediate_size=128))
    assert "model.layers.0.mlp.gate_proj.weight has shape (96, 64), the config implies (128, 64)" in message


def test_the_expected_shapes_are_those_of_the_model_the_config_builds():
    for model_type, overrides in HF_CONFIGS.values():
        for bias in (False, True):
            hf = dict(vocab_size=50, hidden_size=32, num_hidden_layers=3, num_attention_heads=4)
            hf |= dict(intermediate_size=48, head_dim=16, num_key_value_heads=2, model_type=model_type)
            config = explorer.ModelConfig.from_hf_config({**hf, **overrides, "mlp_bias": bias})
            with torch.device("meta"):
                model = Transformer(config)
            built = {
                ("lm_head.weight" if k == "lm_head.weight" else f"model.{k}"): tuple(v.shape)
                for k, v in model.state_dict().items()
                if not (config.tie_word_embeddings and k == "lm_head.weight")
            }
            assert weights.expected_shapes(config) == built


@pytest.mark.parametrize(
    "shard", ["../outside.safetensors", "/etc/passwd", "sub/../../x.safetensors", "x.bin"]
)
def test_a_shard_path_that_leaves_the_checkpoint_is_refused(
    tmp_path, gqa_checkpoint, shard, nothing_is_built
):
    directory = copy_checkpoint(gqa_checkpoint, tmp_path / "sharded")
    (tmp_path / "outside.safetensors").write_bytes((gqa_checkpoint / "model.safetensors").read_bytes())
    (directory / "model.safetensors").unlink()
    index = {"metadata": {}, "weight_map": {"model.embed_tokens.weight": shard}}
    (directory / "model.safetensors.index.json").write_text(json.dumps(index))
    message = refusal(directory)
    assert "names a shard" in message and "that is not a .safetensors file inside the checkpoint" in message


def test_sharded_checkpoints_inside_the_directory_still_load(tmp_path, tiny_tokenizer):
    from conftest import make_hf_checkpoint

    make_hf_checkpoint(tmp_path, tiny_tokenizer, "llama", max_shard_size="40KB")
    assert (tmp_path / "model.safetensors.index.json").is_file()
    assert explorer.load(tmp_path, device="cpu").config.n_layers == 3


def test_a_pickle_renamed_safetensors_is_refused_unread(tmp_path, gqa_checkpoint, nothing_is_built):
    directory = copy_checkpoint(gqa_checkpoint, tmp_path / "pickled")
    torch.save({"model.embed_tokens.weight": torch.zeros(2, 2)}, directory / "model.safetensors")
    message = refusal(directory)
    assert "model.safetensors is not a safetensors file (a renamed pickle, or damaged)" in message


def test_integer_weights_and_offsets_past_the_file_are_refused(tmp_path, gqa_checkpoint, nothing_is_built):
    from safetensors.torch import save_file

    directory = copy_checkpoint(gqa_checkpoint, tmp_path / "ints")
    save_file(
        {"model.embed_tokens.weight": torch.zeros(2, 2, dtype=torch.int64)}, directory / "model.safetensors"
    )
    assert "is 'I64'; weights are floats" in refusal(directory)
    (directory / "model.safetensors").write_bytes((gqa_checkpoint / "model.safetensors").read_bytes()[:-100])
    assert "is not a safetensors file" in refusal(directory)


def test_a_path_too_long_for_the_file_system_gets_a_clear_message():
    message = refusal("/" + "a" * 5000)
    assert "cannot be read as a path (File name too long)" in message


def test_a_config_that_is_not_a_json_object_or_too_big_is_refused(tmp_path, gqa_checkpoint):
    directory = copy_checkpoint(gqa_checkpoint, tmp_path / "odd")
    (directory / "config.json").write_text("[1, 2, 3]")
    assert "config.json does not hold a JSON object" in refusal(directory)
    (directory / "config.json").write_text(" " * (2 << 20))
    assert "config.json is 2,097,152 bytes; at most 1,048,576 are read" in refusal(directory)


def test_a_hub_model_is_named_by_its_id_never_by_its_cache_path(tmp_path, gqa_checkpoint, monkeypatch):
    import huggingface_hub

    directory = copy_checkpoint(gqa_checkpoint, tmp_path / "cache" / "snapshots" / "abc123")
    (directory / "tokenizer.json").unlink()
    listing = SimpleNamespace(siblings=[])
    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", lambda self, repo_id, **kw: listing)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", lambda repo_id, **kw: str(directory))
    message = refusal("small-org/tiny")
    assert message.startswith("small-org/tiny: there is no tokenizer.json") and str(tmp_path) not in message


# --- tokenizer.json, counted before it is built (issue 24, items 3 and 4) ------------------------------


def with_added_tokens(checkpoint, count: int, first_id: int, length: int = 12) -> None:
    """`count` added tokens of `length` characters, ids from `first_id`, in the checkpoint's tokenizer."""
    file = checkpoint / "tokenizer.json"
    tokenizer = json.loads(file.read_text())
    tokenizer["added_tokens"] += [
        dict(
            id=first_id + i,
            content=f"<t{i}>".ljust(length, "x"),
            single_word=False,
            lstrip=False,
            rstrip=False,
            normalized=False,
            special=True,
        )
        for i in range(count)
    ]
    file.write_text(json.dumps(tokenizer))


@pytest.fixture
def nothing_tokenized(monkeypatch):
    """Fail the test if a tokenizer is built."""

    def refuse(*args, **kwargs):
        raise AssertionError("the tokenizer was built before the checkpoint was refused")

    monkeypatch.setattr(folders, "Tokenizer", SimpleNamespace(from_file=refuse))


def test_a_tokenizer_whose_ids_pass_the_vocabulary_is_refused_before_it_is_built(
    tmp_path, gqa_checkpoint, nothing_tokenized
):
    """Added tokens with ids past the embedding loaded, and a prompt holding one got an IndexError."""
    checkpoint = copy_checkpoint(gqa_checkpoint, tmp_path / "past")
    vocab_size = json.loads((checkpoint / "config.json").read_text())["vocab_size"]
    with_added_tokens(checkpoint, 1, first_id=vocab_size + 5)
    message = refusal(checkpoint)
    assert (
        f"gives a token ('<t0>xxxxxxxx') the id {vocab_size + 5:,}, outside the model's vocabulary of"
        in message
    )


def test_a_tokenizer_of_a_hundred_thousand_added_tokens_is_refused_before_it_is_built(
    tmp_path, gqa_checkpoint, nothing_tokenized
):
    """400,000 added tokens (62.7 MB) held every page for 6.5 s while the tokenizer was built."""
    checkpoint = copy_checkpoint(gqa_checkpoint, tmp_path / "added")
    with_added_tokens(checkpoint, 100_000, first_id=0)
    message = refusal(checkpoint)
    assert re.search(r"tokenizer.json adds 100,00\d tokens \([\d,]+ bytes of text\)", message)
    assert "at most 65,536 tokens and 1,048,576 bytes are built" in message


def test_the_tokenizers_memory_counts_in_the_budget(tmp_path, gqa_checkpoint):
    checkpoint = copy_checkpoint(gqa_checkpoint, tmp_path / "counted")
    loaded = explorer.load(checkpoint, device="cpu")
    counts = folders.inspect_tokenizer(checkpoint / "tokenizer.json")
    assert loaded.tokenizer_nbytes == counts.nbytes() > 200 * counts.vocab
    weights_only = sum(p.numel() * 4 for p in loaded.model.parameters())
    with pytest.raises(CheckpointError, match="above the memory budget"):
        explorer.load(checkpoint, device="cpu", max_bytes=weights_only + counts.nbytes() // 2)

"""Hostile files from an outside probe (issue 24), each refused with one clear message before a weight is
dequantized or a tokenizer is built: GGUF arrays far longer than any vocabulary, token lists longer than
the embedding, tensors whose bytes overlap, leave the file or are misaligned, NaN and infinite config
numbers, sizes that are negative or zero, and values too long to quote. (config.json's own cases are in
test_checkpoint_checks.)"""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest

import explorer
from explorer.errors import CheckpointError
from explorer.loading import gguf
from explorer.loading.gguf_header import read_header
from tests.conftest import make_hf_checkpoint, refusal
from tests.gguf_files import (
    patch_array_count,
    patch_name,
    patch_tensor,
    patch_value,
    tensor_entry,
    write_gguf,
)

INT32 = 5  # GGUF value type of a signed 32-bit integer


@pytest.fixture(scope="module")
def source(tmp_path_factory, tiny_tokenizer):
    """A seeded llama (hidden 64, 8 heads of 16 sharing 2 kv heads, 3 layers, 320 tokens)."""
    return make_hf_checkpoint(tmp_path_factory.mktemp("hostile-source"), tiny_tokenizer, "llama")


@pytest.fixture(scope="module")
def good_bytes(source, tiny_tokenizer, tmp_path_factory) -> bytes:
    path = tmp_path_factory.mktemp("hostile-good") / "good.gguf"
    return write_gguf(path, source, tiny_tokenizer, "llama").read_bytes()


@pytest.fixture
def good_file(good_bytes, tmp_path):
    """A fresh copy of a good GGUF file, for a test to damage."""
    path = tmp_path / "hostile.gguf"
    path.write_bytes(good_bytes)
    return path


@pytest.fixture
def nothing_is_built(monkeypatch):
    """Fail the test if the tokenizer is built or a weight is dequantized before the refusal."""

    def refuse(*args, **kwargs):
        raise AssertionError("the tokenizer was built or weights were read before the file was refused")

    monkeypatch.setattr(gguf, "read_tokenizer", refuse)
    monkeypatch.setattr(gguf, "read_state_dict", refuse)


def header_refusal(path) -> str:
    with pytest.raises(CheckpointError) as error:
        read_header(path)
    return str(error.value)


# --- 1. token lists and other arrays: bounded before they are walked, and no longer than the embedding ---


def test_a_gguf_declaring_ten_million_tokens_is_refused_before_they_are_walked(good_file, nothing_is_built):
    patch_array_count(good_file, "tokenizer.ggml.tokens", 10**7)
    message = refusal(good_file)
    assert message == (
        "hostile.gguf: metadata 'tokenizer.ggml.tokens' is an array of 10,000,000 values; "
        "at most 2,097,152 are read."
    )


def test_a_gguf_whose_token_list_is_longer_than_its_embedding_is_refused_before_the_tokenizer_is_built(
    source, tiny_tokenizer, tmp_path, nothing_is_built
):
    path = write_gguf(tmp_path / "long.gguf", source, tiny_tokenizer, "llama", extra_tokens=1000)
    message = refusal(path)
    assert message == "long.gguf lists 1,320 tokens for an embedding of 320 rows."


def test_a_gguf_without_a_token_list_is_refused(good_file, nothing_is_built):
    patch_name(good_file, "tokenizer.ggml.tokens", "tokenizer.ggml.tokenz")
    message = refusal(good_file)
    assert message == "hostile.gguf has no token list (tokenizer.ggml.tokens), so no tokenizer."


@pytest.mark.parametrize(
    "key, value, value_type, quoted",
    [
        ("tokenizer.ggml.bos_token_id", 320, None, "320"),
        ("tokenizer.ggml.eos_token_id", 4_000_000_000, None, "4,000,000,000"),
        ("tokenizer.ggml.eos_token_id", -1, INT32, "-1"),
    ],
)
def test_bos_and_eos_ids_outside_the_token_list_are_refused(
    good_file, nothing_is_built, key, value, value_type, quoted
):
    patch_value(good_file, key, value, value_type)
    message = refusal(good_file)
    assert message == f"hostile.gguf: {key} is {quoted}, not one of the 320 tokens it lists."


def test_string_arrays_keep_their_count_and_bytes_and_long_number_arrays_only_their_length(
    source, tiny_tokenizer, tmp_path
):
    path = write_gguf(tmp_path / "long.gguf", source, tiny_tokenizer, "llama", extra_tokens=1000)
    header = read_header(path)
    vocab = tiny_tokenizer.get_vocab()
    tokens = sorted(vocab, key=vocab.get) + [f"<extra_{i}>" for i in range(1000)]
    assert header.string_arrays["tokenizer.ggml.tokens"] == (1320, sum(len(t.encode()) for t in tokens))
    assert header.metadata["tokenizer.ggml.tokens"] == 1320  # as before: a string array is its count
    assert header.metadata["tokenizer.ggml.token_type"] == 1320  # 1,320 numbers: counted, not decoded
    assert {"tokenizer.ggml.tokens", "tokenizer.ggml.token_type"} <= header.counted
    assert "tokenizer.ggml.merges" in header.string_arrays


def test_a_long_array_of_numbers_is_never_read_as_a_size(source, tiny_tokenizer, tmp_path, nothing_is_built):
    path = write_gguf(tmp_path / "long.gguf", source, tiny_tokenizer, "llama", extra_tokens=1000)
    patch_name(path, "llama.feed_forward_length", "llama.feed_forward_lengtx")
    patch_name(path, "tokenizer.ggml.token_type", "llama.feed_forward_length")  # 1,320 numbers
    message = refusal(path)
    assert message == "long.gguf: llama.feed_forward_length is an array of 1,320 values, not a single number."


def test_a_gguf_declaring_a_billion_metadata_values_or_tensors_is_refused_unread(good_file):
    blob = bytearray(good_file.read_bytes())
    struct.pack_into("<Q", blob, 16, 10**9)  # after magic, version and the tensor count
    good_file.write_bytes(blob)
    assert header_refusal(good_file) == (
        "hostile.gguf declares 1,000,000,000 metadata values; at most 65,536 are read."
    )
    struct.pack_into("<QQ", blob, 8, 10**9, 40)
    good_file.write_bytes(blob)
    assert "declares 1,000,000,000 tensors; at most 65,536 are read." in header_refusal(good_file)


# --- 2. tensor regions: inside the file, aligned, disjoint; shapes ggml can hold ---


def test_a_gguf_whose_tensor_regions_overlap_is_refused(good_file, nothing_is_built):
    _, gate_offset = tensor_entry(good_file, "blk.0.ffn_gate.weight")
    patch_tensor(good_file, "blk.0.ffn_up.weight", offset=gate_offset)  # same shape and type: it loaded
    message = refusal(good_file)
    assert "blk.0.ffn_gate.weight (bytes" in message and "blk.0.ffn_up.weight (from byte" in message
    assert message.endswith("overlap; each tensor needs bytes of its own.")


def test_a_gguf_tensor_declared_larger_than_its_data_is_refused_for_reading_its_neighbours(good_file):
    patch_tensor(good_file, "blk.0.attn_norm.weight", shape=(4096,))  # 64 values of data
    assert "blk.0.attn_norm.weight (bytes" in header_refusal(good_file)


def test_a_gguf_tensor_at_a_misaligned_offset_is_refused(good_file, nothing_is_built):
    _, offset = tensor_entry(good_file, "blk.1.ffn_up.weight")
    patch_tensor(good_file, "blk.1.ffn_up.weight", offset=offset + 4)
    message = refusal(good_file)
    assert message == (
        f"hostile.gguf: tensor blk.1.ffn_up.weight starts at data offset {offset + 4:,}, "
        "not a multiple of the file's alignment (32)."
    )


@pytest.mark.parametrize("alignment", [0, 3, 1 << 20])
def test_an_alignment_that_is_not_a_power_of_two_up_to_65536_is_refused(good_file, alignment):
    patch_value(good_file, "general.alignment", alignment)
    assert header_refusal(good_file) == (
        f"hostile.gguf: general.alignment is {alignment:,}; it must be a power of two from 1 to 65,536."
    )


@pytest.mark.parametrize(
    "shape, expected",
    [
        ((0, 64), "tensor blk.0.ffn_up.weight has a dimension of size 0 ((64, 0))."),
        ((1 << 62, 64), "is truncated: tensor blk.0.ffn_up.weight of shape (4611686018427387904, 64) ends"),
    ],
)
def test_a_gguf_tensor_of_zero_or_absurd_size_is_refused(good_file, shape, expected):
    patch_tensor(good_file, "blk.0.ffn_up.weight", shape=shape)  # 1 << 62 rows overflowed an int64 count
    assert expected in header_refusal(good_file)


def test_a_gguf_tensor_of_five_dimensions_is_refused(good_file):
    patch_tensor(good_file, "blk.0.ffn_up.weight", n_dims=5)
    assert "tensor blk.0.ffn_up.weight has 5 dimensions; ggml tensors have 1 to 4." in header_refusal(
        good_file
    )


def test_a_gguf_listing_a_tensor_twice_is_refused(good_file):
    patch_name(good_file, "blk.1.ffn_up.weight", "blk.0.ffn_up.weight")
    assert header_refusal(good_file) == "hostile.gguf lists tensor blk.0.ffn_up.weight twice."


def test_a_gguf_tensor_name_past_ggml_limit_is_refused_and_quoted_briefly(tmp_path):
    from gguf import GGUFWriter

    path = tmp_path / "names.gguf"
    writer = GGUFWriter(str(path), "llama")
    writer.add_tensor("w" * 5000, np.zeros(4, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    message = header_refusal(path)
    assert (
        message.startswith("names.gguf names a tensor 'wwww")
        and "of 5,000 bytes; ggml names have at most 63" in message
    )
    assert len(message) < 150


# --- 3. NaN and infinity: refused in config.json and in GGUF metadata alike ---


@pytest.mark.parametrize(
    "key, value, expected",
    [
        ("llama.rope.freq_base", math.nan, "rope_theta must be a finite number in (1, 1e12], got nan"),
        (
            "llama.attention.layer_norm_rms_epsilon",
            math.inf,
            "rms_norm_eps must be a finite number in (1e-30, 1]",
        ),
    ],
)
def test_nan_and_infinite_gguf_numbers_are_refused_by_name(good_file, nothing_is_built, key, value, expected):
    patch_value(good_file, key, value)
    message = refusal(good_file)
    assert message.startswith("hostile.gguf: ") and expected in message


def test_nan_rope_freqs_in_a_gguf_are_refused(source, tiny_tokenizer, tmp_path, nothing_is_built):
    factors = np.full(8, np.nan, dtype=np.float32)  # head_dim 16: 8 pairs
    path = write_gguf(tmp_path / "freqs.gguf", source, tiny_tokenizer, "llama", rope_freqs=factors)
    message = refusal(path)
    assert message == (
        "freqs.gguf: rope_freq_factors must be 8 finite positive numbers, got 8 starting (nan, nan, nan, nan)"
    )


# --- 4. sizes checked before anything is derived from them; long values quoted briefly ---


@pytest.mark.parametrize(
    "key, value, expected",
    [
        (
            "llama.embedding_length",
            -64,
            "llama.embedding_length is -64; it must be a whole number from 1 to 32,768 (hidden_size).",
        ),
        (
            "llama.attention.head_count",
            0,
            "llama.attention.head_count is 0; it must be a whole number from 1 to 256 (n_heads).",
        ),
    ],
)
def test_a_gguf_with_a_negative_width_or_no_heads_is_refused_by_that_size_not_as_partial_rope(
    good_file, nothing_is_built, key, value, expected
):
    patch_name(good_file, "llama.attention.key_length", "llama.attention.key_lengtx")  # head_dim derived
    patch_value(good_file, key, value, INT32)
    message = refusal(good_file)
    assert message == f"hostile.gguf: {expected}" and "partial RoPE" not in message


def test_a_long_architecture_name_is_quoted_briefly(tmp_path):
    from gguf import GGUFWriter

    path = tmp_path / "arch.gguf"
    writer = GGUFWriter(str(path), "gemma" * 1000)
    writer.add_tensor("token_embd.weight", np.zeros((8, 4), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    message = refusal(path)
    assert "of architecture 'gemmagemma" in message and len(message) < 160


def test_a_ggufs_tokenizer_memory_is_counted_from_its_token_and_merge_lists(good_file):
    """The 10⁷-token file's tokenizer was counted nowhere: a load held 2.5 GB beyond the budget."""
    from explorer.loading.weights import tokenizer_nbytes

    arrays = read_header(good_file).string_arrays
    tokens, merges = arrays["tokenizer.ggml.tokens"][0], arrays["tokenizer.ggml.merges"][0]
    loaded = explorer.load(good_file, device="cpu")
    assert loaded.tokenizer_nbytes == tokenizer_nbytes(tokens, merges) > 0

"""Hostile GGUF files from an outside probe (issue 24), each refused with one clear message before a
weight is dequantized or a tokenizer is built: metadata arrays far longer than any vocabulary, and
tensors whose bytes overlap, leave the file or are misaligned."""

from __future__ import annotations

import struct
import time

import numpy as np
import pytest

import explorer
from explorer.errors import CheckpointError
from explorer.loading import gguf
from explorer.loading.gguf_header import read_header
from tests.conftest import make_hf_checkpoint
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


def refusal(path) -> tuple[str, float]:
    start = time.perf_counter()
    with pytest.raises(CheckpointError) as error:
        explorer.load(path, device="cpu")
    return str(error.value), time.perf_counter() - start


def header_refusal(path) -> str:
    with pytest.raises(CheckpointError) as error:
        read_header(path)
    return str(error.value)


# --- 1. token lists and other arrays: bounded before they are walked, and no longer than the embedding ---


def test_a_gguf_declaring_ten_million_tokens_is_refused_before_they_are_walked(good_file, nothing_is_built):
    patch_array_count(good_file, "tokenizer.ggml.tokens", 10**7)
    message, seconds = refusal(good_file)
    assert message == (
        "hostile.gguf: metadata 'tokenizer.ggml.tokens' is an array of 10,000,000 values; "
        "at most 2,097,152 are read."
    )
    assert seconds < 1.0


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
    message, _ = refusal(good_file)
    assert "blk.0.ffn_gate.weight (bytes" in message and "blk.0.ffn_up.weight (from byte" in message
    assert message.endswith("overlap; each tensor needs bytes of its own.")


def test_a_gguf_tensor_declared_larger_than_its_data_is_refused_for_reading_its_neighbours(good_file):
    patch_tensor(good_file, "blk.0.attn_norm.weight", shape=(4096,))  # 64 values of data
    assert "blk.0.attn_norm.weight (bytes" in header_refusal(good_file)


def test_a_gguf_tensor_at_a_misaligned_offset_is_refused(good_file, nothing_is_built):
    _, offset = tensor_entry(good_file, "blk.1.ffn_up.weight")
    patch_tensor(good_file, "blk.1.ffn_up.weight", offset=offset + 4)
    message, _ = refusal(good_file)
    assert message == (
        f"hostile.gguf: tensor blk.1.ffn_up.weight starts at data offset {offset + 4:,}, "
        "not a multiple of the file's alignment (32)."
    )


@pytest.mark.parametrize("alignment", [0, 3, 1 << 20])
def test_an_alignment_that_is_not_a_power_of_two_up_to_65536_is_refused(good_file, alignment):
    patch_value(good_file, "general.alignment", alignment)
    assert header_refusal(good_file) == (
        f"hostile.gguf: general.alignment is {alignment}; it must be a power of two from 1 to 65,536."
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

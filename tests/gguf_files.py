"""Small GGUF files written by the tests with gguf-py's writer, laid out as llama.cpp's converter
lays them out: tensor names, Q/K rows permuted for llama, the vocabulary and merges as metadata.

Weights come from a seeded transformers model. A tensor asked for in a quantized type is quantized by
gguf-py where it can (Q8_0, Q4_0 …); gguf-py has no K-quant quantizer, so a K-quant tensor is written
as random blocks with small scales: the file then holds different weights than the transformers
model, and the tests compare two readers of the same file (ours and transformers'), never the file
with the model it came from.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

HF_TO_GGUF = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
}
LAYER_HF_TO_GGUF = {
    "input_layernorm": "attn_norm",
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "post_attention_layernorm": "ffn_norm",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
    "self_attn.q_norm": "attn_q_norm",
    "self_attn.k_norm": "attn_k_norm",
}


# Gemma's four norms a block, as llama.cpp's converter names them
GEMMA_LAYER_HF_TO_GGUF = LAYER_HF_TO_GGUF | {
    "post_attention_layernorm": "post_attention_norm",
    "pre_feedforward_layernorm": "ffn_norm",
    "post_feedforward_layernorm": "post_ffw_norm",
}


def gguf_name(hf_name: str, architecture: str = "llama") -> str:
    if hf_name in HF_TO_GGUF:
        return HF_TO_GGUF[hf_name]
    _, _, layer, *module, kind = hf_name.split(".")
    names = GEMMA_LAYER_HF_TO_GGUF if architecture == "gemma3" else LAYER_HF_TO_GGUF
    return f"blk.{layer}.{names['.'.join(module)]}.{kind}"


def permute(weight: np.ndarray, n_heads: int) -> np.ndarray:
    """llama.cpp's `LlamaModel.permute`: each head's halves interleaved, for its pairwise RoPE."""
    return (
        weight.reshape(n_heads, 2, weight.shape[0] // n_heads // 2, *weight.shape[1:])
        .swapaxes(1, 2)
        .reshape(weight.shape)
    )


def random_blocks(shape: tuple[int, int], type_name: str, seed: int) -> np.ndarray:
    """Bytes for a [rows, cols] tensor of a type gguf-py cannot quantize: random codes, and for the
    K-quants valid scales of a few ten-thousandths."""
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    qtype = GGMLQuantizationType[type_name]
    block, block_bytes = GGML_QUANT_SIZES[qtype]
    rng = np.random.default_rng(seed)
    blocks = rng.integers(0, 256, size=(shape[0], shape[1] // block, block_bytes), dtype=np.uint8)
    scales = np.array([2e-4, 1e-4], dtype=np.float16).view(np.uint8)  # d and dmin, little-endian f16
    if type_name in ("Q4_K", "Q5_K", "Q2_K"):
        blocks[..., 0:4] = scales  # d, dmin lead the block
    elif type_name in ("Q3_K", "Q6_K"):  # one f16 scale d ends the block
        blocks[..., -2:] = scales[:2]
    return blocks.reshape(shape[0], -1)


def write_gguf(
    path: Path,
    hf_model,
    tokenizer: Tokenizer,
    architecture: str,
    types: dict[str, str] | None = None,
    rope_freqs: np.ndarray | None = None,
    name: str = "explorer test model",
    drop: tuple[str, ...] = (),
    dense=np.float16,
    extra_tokens: int = 0,
) -> Path:
    """Write `hf_model` (+ `tokenizer`) as llama.cpp would. `types` maps a substring of a GGUF tensor
    name to its ggml type ("attn_q": "Q4_K"); the rest is F32 (1-D) or `dense` (2-D). Tensors named in
    `drop` are left out, and `extra_tokens` tokens past the embedding's rows are listed (to write a
    broken file). The alignment is written (32, the default) so a test can patch it."""
    from gguf import GGMLQuantizationType, GGUFWriter, quants

    config = hf_model.config
    writer = GGUFWriter(str(path), architecture)
    writer.add_name(name)
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    head_dim = config.head_dim
    writer.add_key_length(head_dim)
    writer.add_value_length(head_dim)
    writer.add_rope_dimension_count(head_dim)
    gemma = architecture == "gemma3"
    if gemma:  # llama.cpp keeps the full layers' base; the sliding layers' is its own default
        writer.add_rope_freq_base(float(config.rope_parameters["full_attention"]["rope_theta"]))
        writer.add_sliding_window(config.sliding_window)
    else:
        writer.add_rope_freq_base(float(config.rope_parameters["rope_theta"]))
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    writer.add_vocab_size(config.vocab_size)
    writer.add_custom_alignment(32)
    _add_tokenizer(writer, tokenizer, extra_tokens)

    types = types or {}
    permuted = architecture == "llama"
    for seed, (hf_name, tensor) in enumerate(hf_model.state_dict().items()):
        if hf_name == "lm_head.weight" and config.tie_word_embeddings:
            continue
        target = gguf_name(hf_name, architecture)
        if target in drop:
            continue
        values = tensor.detach().float().numpy()
        if gemma and target.endswith("norm.weight"):  # llama.cpp stores Gemma's norms as 1 + w
            values = values + 1
        if permuted and ".attn_q." in target:
            values = permute(values, config.num_attention_heads)
        if permuted and ".attn_k." in target:
            values = permute(values, config.num_key_value_heads)
        type_name = next((t for part, t in types.items() if part in target), None)
        if values.ndim == 1 or type_name is None:
            data = values.astype(np.float32 if values.ndim == 1 else dense)
            writer.add_tensor(target, data)
        elif type_name.endswith("_K") or type_name.startswith("IQ"):
            blocks = random_blocks(values.shape, type_name, seed)
            qtype = GGMLQuantizationType[type_name]
            writer.add_tensor(target, blocks, raw_shape=blocks.shape, raw_dtype=qtype)
        else:
            qtype = GGMLQuantizationType[type_name]
            writer.add_tensor(target, quants.quantize(values, qtype), raw_shape=None, raw_dtype=qtype)
    if rope_freqs is not None:
        writer.add_tensor("rope_freqs.weight", rope_freqs.astype(np.float32))

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _add_tokenizer(writer, tokenizer: Tokenizer, extra_tokens: int = 0) -> None:
    """A byte-level BPE as llama.cpp writes one: tokens by id, merges "a b", special ones marked control."""
    vocab = tokenizer.get_vocab()
    tokens = sorted(vocab, key=vocab.get) + [f"<extra_{i}>" for i in range(extra_tokens)]
    special = {token.content for token in tokenizer.get_added_tokens_decoder().values() if token.special}
    merges = json.loads(tokenizer.to_str())["model"]["merges"]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types([3 if token in special else 1 for token in tokens])
    writer.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in merges])
    end = vocab.get("<|endoftext|>", 0)
    writer.add_bos_token_id(end)
    writer.add_eos_token_id(end)
    writer.add_add_bos_token(False)


# --- hostile files: a good file's header bytes changed in place, its layout kept ---

_SCALAR_FORMATS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


def _find(blob: bytearray, name: str) -> int:
    """Where the bytes after the GGUF string `name` (a key or a tensor name) begin."""
    needle = struct.pack("<Q", len(name.encode())) + name.encode()
    return blob.index(needle) + len(needle)


def patch_value(path: Path, key: str, value, value_type: int | None = None) -> Path:
    """Overwrite the scalar metadata value `key`, optionally with another type of the same size
    (4 -> 5 makes a uint32 an int32, so it can be negative)."""
    blob = bytearray(path.read_bytes())
    at = _find(blob, key)
    (old_type,) = struct.unpack_from("<I", blob, at)
    new_type = old_type if value_type is None else value_type
    assert struct.calcsize(_SCALAR_FORMATS[new_type]) == struct.calcsize(_SCALAR_FORMATS[old_type])
    struct.pack_into(f"<I{_SCALAR_FORMATS[new_type]}", blob, at, new_type, value)
    path.write_bytes(blob)
    return path


def patch_array_count(path: Path, key: str, count: int) -> Path:
    """Declare the metadata array `key` to hold `count` entries (its entries unchanged)."""
    blob = bytearray(path.read_bytes())
    struct.pack_into("<Q", blob, _find(blob, key) + 8, count)  # after the value type and item type
    path.write_bytes(blob)
    return path


def patch_name(path: Path, name: str, new_name: str) -> Path:
    """Rename a key or a tensor to a name of the same length."""
    assert len(new_name.encode()) == len(name.encode())
    blob = bytearray(path.read_bytes())
    at = _find(blob, name)
    blob[at - len(name.encode()) : at] = new_name.encode()
    path.write_bytes(blob)
    return path


def tensor_entry(path: Path, name: str) -> tuple[tuple[int, ...], int]:
    """A tensor's dims (torch order) and its offset in the data, as the file's table lists them."""
    blob = bytearray(path.read_bytes())
    at = _find(blob, name)
    (n_dims,) = struct.unpack_from("<I", blob, at)
    dims = struct.unpack_from(f"<{n_dims}Q", blob, at + 4)
    (offset,) = struct.unpack_from("<Q", blob, at + 4 + 8 * n_dims + 4)
    return tuple(reversed(dims)), offset


def patch_tensor(path: Path, name: str, shape=None, offset: int | None = None, n_dims: int | None = None):
    """Overwrite a tensor's table entry: its shape (torch order, as many dims as it has), its offset in
    the data, or its count of dimensions alone (then the rest of the table no longer parses as before)."""
    blob = bytearray(path.read_bytes())
    at = _find(blob, name)
    (dims,) = struct.unpack_from("<I", blob, at)
    if shape is not None:
        assert len(shape) == dims
        struct.pack_into(f"<{dims}Q", blob, at + 4, *reversed(shape))
    if offset is not None:
        struct.pack_into("<Q", blob, at + 4 + 8 * dims + 4, offset)
    if n_dims is not None:
        struct.pack_into("<I", blob, at, n_dims)
    path.write_bytes(blob)
    return path

"""GGUF files (llama.cpp, Ollama, LM Studio): a Llama-family model and its tokenizer in one file.

    header (metadata + tensor table) -> ModelConfig -> every tensor checked -> dequantized -> our model

- The header is parsed by `explorer.loading.gguf_header`, the metadata values we use alone decoded.
- Tensor bytes are dequantized to float32 by llama.cpp's own dequantizer (gguf-py's, a large run of
  blocks at a time: `explorer.loading.dequant`), for the types in `gguf_header.TENSOR_TYPES`; nothing
  here decodes a quantized block by hand.
- llama.cpp stores the rows of Q and K permuted for its interleaved RoPE (`convert_hf_to_gguf.py`,
  `LlamaModel.permute`); `unpermute` undoes it, so our rotate-half RoPE reproduces the model. qwen2
  and qwen3 files are written unpermuted (llama.cpp runs them with NEOX, i.e. rotate-half, RoPE).
- The tokenizer is built by transformers from the file's metadata, exactly as
  `AutoTokenizer.from_pretrained(dir, gguf_file=...)` builds it (transformers is imported lazily, for
  .gguf files only), so token ids agree with transformers' to the last one; what it built is kept in
  the user's cache for the next load (`explorer.loading.gguf_tokenizer`).

Every way a file can be wrong ends in one `CheckpointError` naming what is wrong, raised before the
weights are dequantized or the tokenizer is built: not a GGUF file, truncated, overlapping tensors,
another architecture, a size or number out of range, a missing or extra tensor, a tensor of the wrong
shape or of a type we cannot dequantize, a token list longer than the embedding.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from explorer.engine import deadline
from explorer.engine.config import (
    SIZE_LIMITS,
    UNSUPPORTED_VARIANTS,
    ModelConfig,
    RopeScaling,
    brief,
    brief_count,
)
from explorer.errors import CheckpointError
from explorer.loading import dequant
from explorer.loading.gguf_header import Header, TensorInfo, read_header
from explorer.loading.gguf_tokenizer import check_tokenizer, read_tokenizer
from explorer.loading.weights import Checkpoint, Fits, build_model, check_fits, tokenizer_nbytes

ARCHITECTURES = {  # GGUF name -> model_type
    "llama": "llama",
    "mistral": "mistral",
    "qwen2": "qwen2",
    "qwen3": "qwen3",
    "gemma3": "gemma3_text",
}
GGUF_VARIANTS = {"qwen3moe": "qwen3_moe", "qwen2moe": "qwen2_moe"}  # GGUF name -> model_type refused
# written as they are: llama.cpp runs them with NEOX (rotate-half) RoPE
UNPERMUTED = ("qwen2", "qwen3", "gemma3_text")
# llama.cpp's tensor names (gguf-py `TENSOR_NAMES`) -> ours (HF Llama's, which `build_model` reads).
GLOBAL_TENSORS = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}
LAYER_TENSORS = {
    "attn_norm.weight": "input_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_q.bias": "self_attn.q_proj.bias",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_k.bias": "self_attn.k_proj.bias",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_v.bias": "self_attn.v_proj.bias",
    "attn_output.weight": "self_attn.o_proj.weight",
    "attn_output.bias": "self_attn.o_proj.bias",
    "attn_q_norm.weight": "self_attn.q_norm.weight",
    "attn_k_norm.weight": "self_attn.k_norm.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}
# Gemma's four norms a block: llama.cpp's ffn_norm is the one before the MLP there
SANDWICH_TENSORS = LAYER_TENSORS | {
    "post_attention_norm.weight": "post_attention_layernorm.weight",
    "ffn_norm.weight": "pre_feedforward_layernorm.weight",
    "post_ffw_norm.weight": "post_feedforward_layernorm.weight",
}
GEMMA3_SLIDING_PATTERN = 6  # llama.cpp's gemma3: every sixth layer full, the rest sliding
GEMMA3_27B_LAYERS = 62  # llama.cpp scales its queries by 1/√(hidden/heads), the rest by 1/√head_dim
ROPE_FREQS = "rope_freqs.weight"  # Llama 3.1+: per-pair divisors of θ_i (llama3 RoPE scaling)

Progress = Callable[[float, str], None]


def config_from_header(header: Header, name: str) -> ModelConfig:
    """A ModelConfig from llama.cpp's metadata keys (`{arch}.block_count`, ...): every size checked
    (a whole number within `SIZE_LIMITS`) before one is derived from another or compared."""
    architecture = header.architecture
    if architecture in GGUF_VARIANTS:
        raise CheckpointError(
            f"{name} is a {architecture} model: it needs {UNSUPPORTED_VARIANTS[GGUF_VARIANTS[architecture]]}."
        )
    if architecture not in ARCHITECTURES:
        raise CheckpointError(
            f"{name} is a GGUF file of architecture {brief(architecture)}, which is not supported "
            f"(supported: {', '.join(ARCHITECTURES)})."
        )
    try:
        return _config(header, name)
    except ValueError as error:  # a metadata value, or ModelConfig's own checks
        raise CheckpointError(f"{name}: {error}") from None


def _config(header: Header, name: str) -> ModelConfig:
    architecture = header.architecture
    n_heads = _size(header, "attention.head_count", "n_heads")
    hidden = _size(header, "embedding_length", "hidden_size")
    if header.key("attention.key_length") is None and hidden % n_heads:
        raise ValueError(
            f"{architecture}.embedding_length {hidden:,} is not a multiple of "
            f"{architecture}.attention.head_count {n_heads}, and no attention.key_length is given."
        )
    head_dim = _size(header, "attention.key_length", "head_dim", hidden // n_heads)
    rotated = _size(header, "rope.dimension_count", "head_dim", head_dim)
    if rotated != head_dim:
        raise CheckpointError(
            f"{name} rotates {rotated} of {head_dim} dimensions per head; partial RoPE is not supported."
        )
    embeddings = header.tensors.get("token_embd.weight")
    if embeddings is None and header.key("vocab_size") is None:
        raise ValueError(f"there is neither {architecture}.vocab_size nor a token_embd.weight tensor.")
    n_layers = _size(header, "block_count", "n_layers")
    gemma = _gemma3(header, n_layers, hidden, n_heads, head_dim) if architecture == "gemma3" else {}
    return ModelConfig(
        vocab_size=_size(header, "vocab_size", "vocab_size", embeddings and embeddings.shape[0]),
        hidden_size=hidden,
        n_layers=n_layers,
        n_heads=n_heads,
        n_kv_heads=_size(header, "attention.head_count_kv", "n_kv_heads", n_heads),
        intermediate_size=_size(header, "feed_forward_length", "intermediate_size"),
        head_dim=head_dim,
        max_position_embeddings=_size(header, "context_length", "max_position_embeddings", 2048),
        rope_theta=_number(header, "rope.freq_base", 10000.0),
        rope_scaling=_rope_scaling(header, name),
        rms_norm_eps=_number(header, "attention.layer_norm_rms_epsilon", 1e-5),
        tie_word_embeddings="output.weight" not in header.tensors,
        qkv_bias="blk.0.attn_q.bias" in header.tensors,
        o_bias="blk.0.attn_output.bias" in header.tensors,
        qk_norm="blk.0.attn_q_norm.weight" in header.tensors,
        model_type=ARCHITECTURES[architecture],
        bos_token_id=header.metadata.get("tokenizer.ggml.bos_token_id"),
        eos_token_id=header.metadata.get("tokenizer.ggml.eos_token_id"),
        **gemma,
    )


def _gemma3(header: Header, n_layers: int, hidden: int, n_heads: int, head_dim: int) -> dict[str, Any]:
    """What a gemma3 file adds, as llama.cpp reads it: the sliding pattern and local RoPE base it
    assumes (10,000, or `rope.freq_base_swa`), the query scale, (1 + w) norms four a block, GeGLU."""
    pattern = GEMMA3_SLIDING_PATTERN
    cap = header.key("final_logit_softcapping")
    return dict(
        layer_types=tuple(
            "full_attention" if (i + 1) % pattern == 0 else "sliding_attention" for i in range(n_layers)
        ),
        sliding_window=_size(header, "attention.sliding_window", "sliding_window"),
        sliding_rope_theta=_number(header, "rope.freq_base_swa", 10000.0),
        query_pre_attn_scalar=hidden // n_heads if n_layers == GEMMA3_27B_LAYERS else head_dim,
        activation="gelu_tanh",
        embedding_scale=float(hidden) ** 0.5,
        norm_offset=1.0,
        sandwich_norms=True,
        final_logit_softcapping=None if cap is None else _number(header, "final_logit_softcapping", 0.0),
    )


def _value(header: Header, key: str, default: Any) -> Any:
    """An architecture key's value; an array kept only as its length (see `Header.counted`) is refused.
    These helpers raise ValueError, which `config_from_header` turns into a message naming the file."""
    full_key = f"{header.architecture}.{key}"
    if full_key in header.counted:
        raise ValueError(
            f"{full_key} is an array of {header.metadata[full_key]:,} values, not a single number."
        )
    return header.key(key, default)


def _integer(header: Header, key: str, default: int | None = None) -> int:
    value = _value(header, key, default)
    if isinstance(value, list):  # some files give a value per layer
        if len(set(value)) != 1:
            raise ValueError(f"{header.architecture}.{key} differs between layers ({brief(value[:8], 60)}…).")
        value = value[0]
    if value is None:
        raise ValueError(f"the metadata has no {header.architecture}.{key}.")
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{header.architecture}.{key} = {brief(value)} is not an integer.")
    return value


def _size(header: Header, key: str, size: str, default: int | None = None) -> int:
    """An integer key that is one of ModelConfig's sizes: from 1 to its `SIZE_LIMITS` bound."""
    value, limit = _integer(header, key, default), SIZE_LIMITS[size]
    if not 0 < value <= limit:
        raise ValueError(
            f"{header.architecture}.{key} is {brief_count(value)}; "
            f"it must be a whole number from 1 to {limit:,} ({size})."
        )
    return value


def _number(header: Header, key: str, default: float) -> float:
    """A float key, as read; ModelConfig checks it is finite and within its range."""
    value = _value(header, key, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{header.architecture}.{key} = {brief(value)} is not a number.")
    return value


def _rope_scaling(header: Header, name: str) -> RopeScaling:
    kind = header.key("rope.scaling.type", "none")
    if kind in ("none", None):
        return RopeScaling()
    if kind == "linear":
        return RopeScaling(rope_type="linear", factor=_number(header, "rope.scaling.factor", 1.0))
    raise CheckpointError(
        f"{name} asks for RoPE scaling {brief(kind)}; supported: linear, llama3 (rope_freqs)."
    )


def expected_tensors(config: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor a GGUF file of this config must hold, by llama.cpp name, with its shape."""
    hidden, d, inner = config.hidden_size, config.head_dim, config.intermediate_size
    q_rows, kv_rows = config.n_heads * d, config.n_kv_heads * d
    shapes = {"token_embd.weight": (config.vocab_size, hidden), "output_norm.weight": (hidden,)}
    if not config.tie_word_embeddings:
        shapes["output.weight"] = (config.vocab_size, hidden)
    layer = {
        "attn_norm.weight": (hidden,),
        "attn_q.weight": (q_rows, hidden),
        "attn_k.weight": (kv_rows, hidden),
        "attn_v.weight": (kv_rows, hidden),
        "attn_output.weight": (hidden, q_rows),
        "ffn_norm.weight": (hidden,),
        "ffn_gate.weight": (inner, hidden),
        "ffn_up.weight": (inner, hidden),
        "ffn_down.weight": (hidden, inner),
    }
    if config.qkv_bias:
        layer |= {"attn_q.bias": (q_rows,), "attn_k.bias": (kv_rows,), "attn_v.bias": (kv_rows,)}
    if config.o_bias:
        layer["attn_output.bias"] = (hidden,)
    if config.qk_norm:
        layer |= {"attn_q_norm.weight": (d,), "attn_k_norm.weight": (d,)}
    if config.sandwich_norms:
        layer |= {"post_attention_norm.weight": (hidden,), "post_ffw_norm.weight": (hidden,)}
    for i in range(config.n_layers):
        shapes |= {f"blk.{i}.{suffix}": shape for suffix, shape in layer.items()}
    return shapes


def check_tensors(header: Header, config: ModelConfig, name: str) -> None:
    expected = expected_tensors(config)
    missing = [t for t in expected if t not in header.tensors]
    if missing:
        raise CheckpointError(
            f"{name} is missing tensor {missing[0]}"
            + (f" and {len(missing) - 1} more" if len(missing) > 1 else "")
            + f" that a {header.architecture} model of this config needs."
        )
    extra = [t for t in header.tensors if t not in expected and t != ROPE_FREQS]
    if extra:
        raise CheckpointError(
            f"{name} holds tensors this engine does not implement: {', '.join(extra[:3])}"
            + (" …" if len(extra) > 3 else "")
        )
    for tensor, shape in expected.items():
        if header.tensors[tensor].shape != shape:
            raise CheckpointError(
                f"{name}: tensor {tensor} has shape {header.tensors[tensor].shape}, "
                f"the metadata implies {shape}."
            )
    freqs = header.tensors.get(ROPE_FREQS)
    if freqs is not None and freqs.shape != (config.head_dim // 2,):
        raise CheckpointError(
            f"{name}: {ROPE_FREQS} has shape {freqs.shape}, expected ({config.head_dim // 2},)."
        )


def dequantize(path: Path, info: TensorInfo) -> torch.Tensor:
    """One tensor as float32, dequantized by gguf-py (llama.cpp's dequantizer).  # info.shape"""
    return dequant.dequantize(path, info.type_name, info.start, info.nbytes, info.shape)


def unpermute(weight: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Undo llama.cpp's Q/K row order. It writes each head's rows as interleaved pairs
    (x₀, x_{d/2}, x₁, x_{d/2+1}, …) for its pairwise RoPE; we rotate halves.  # [H·d, ...] -> [H·d, ...]"""
    d = weight.shape[0] // n_heads
    return weight.reshape(n_heads, d // 2, 2, *weight.shape[1:]).transpose(1, 2).reshape(weight.shape)


def read_state_dict(path: Path, header: Header, config: ModelConfig, progress: Progress) -> dict:
    """Every tensor dequantized, renamed to HF keys, Q and K rows in rotate-half order; Gemma's norms
    as HF stores them (llama.cpp writes 1 + w)."""
    permuted = config.model_type not in UNPERMUTED
    layer_tensors = SANDWICH_TENSORS if config.sandwich_norms else LAYER_TENSORS
    state = {}
    names = list(expected_tensors(config))
    for done, gguf_name in enumerate(names):
        deadline.stopped()  # a page's Stop ends its load between two tensors
        if done % 16 == 0:
            progress(0.2 + 0.7 * done / len(names), f"Dequantizing {gguf_name} ({done + 1} of {len(names)})")
        tensor = dequantize(path, header.tensors[gguf_name])
        layer, _, suffix = gguf_name.removeprefix("blk.").partition(".")
        if config.norm_offset and gguf_name.endswith("norm.weight"):
            tensor = tensor - config.norm_offset
        if gguf_name in GLOBAL_TENSORS:
            state[GLOBAL_TENSORS[gguf_name]] = tensor
            continue
        if permuted and suffix.startswith("attn_q."):
            tensor = unpermute(tensor, config.n_heads)
        elif permuted and suffix.startswith("attn_k."):
            tensor = unpermute(tensor, config.n_kv_heads)
        state[f"model.layers.{layer}.{layer_tensors[suffix]}"] = tensor
    return state


def load_gguf(
    path: Path, dtype=torch.float32, progress: Progress | None = None, fits: Fits | None = None
) -> Checkpoint:
    """A GGUF file as a Checkpoint: checked whole (and its size once dequantized to `dtype` told to
    `fits`, if given) before a single tensor is dequantized."""
    progress = progress or (lambda fraction, message: None)
    progress(0.0, f"Reading the header of {path.name}")
    header = read_header(path)
    config = config_from_header(header, path.name)
    check_tensors(header, config, path.name)
    check_tokenizer(header, config, path.name)
    tokenizer_bytes = tokenizer_nbytes(
        header.string_arrays.get("tokenizer.ggml.tokens", (0, 0))[0],
        header.string_arrays.get("tokenizer.ggml.merges", (0, 0))[0],
    )
    try:
        check_fits(config, dtype, fits, tokenizer_bytes)
    except CheckpointError as error:
        raise CheckpointError(f"{path.name}: {error}") from None
    if ROPE_FREQS in header.tensors:
        factors = dequantize(path, header.tensors[ROPE_FREQS])
        config = _with_freq_factors(config, factors, path.name)
    progress(0.1, "Building the tokenizer from the file's metadata")
    tokenizer = read_tokenizer(path, config.model_type, header)
    state = read_state_dict(path, header, config, progress)
    progress(0.9, "Building the model")
    model = build_model(config, state, dtype)
    return Checkpoint(
        name=path.name,
        path=path,
        config=config,
        model=model,
        tokenizer=tokenizer,
        tokenizer_bytes=tokenizer_bytes,
    )


def _with_freq_factors(config: ModelConfig, factors: torch.Tensor, name: str) -> ModelConfig:
    try:
        return dataclasses.replace(config, rope_freq_factors=tuple(factors.tolist()))
    except ValueError as error:
        raise CheckpointError(f"{name}: {error}") from None

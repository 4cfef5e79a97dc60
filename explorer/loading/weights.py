"""A model built from Hugging Face-named weights, whatever file held them (a safetensors folder, a GGUF
file): the shapes a config implies, checked before anything is built, and the model and its tokenizer
together (`Checkpoint`)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from tokenizers import Tokenizer

from explorer.engine.config import ModelConfig, brief
from explorer.engine.model import Transformer
from explorer.errors import CheckpointError


@dataclass
class Checkpoint:
    name: str  # what the person asked for, for display
    path: Path
    config: ModelConfig
    model: Transformer
    tokenizer: Tokenizer
    tokenizer_bytes: int = 0  # the memory the tokenizer holds, estimated from what it counts


def expected_shapes(config: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Every weight a checkpoint of `config` holds, by HF Llama name, with its shape (a tied head left
    out): what `Transformer(config)` would hold, known from the config alone, nothing built."""
    hidden, inner, vocab = config.hidden_size, config.intermediate_size, config.vocab_size
    q_rows, kv_rows = config.n_heads * config.head_dim, config.n_kv_heads * config.head_dim
    shapes = {"model.embed_tokens.weight": (vocab, hidden), "model.norm.weight": (hidden,)}
    if not config.tie_word_embeddings:
        shapes["lm_head.weight"] = (vocab, hidden)
    layer = {
        "input_layernorm.weight": (hidden,),
        "self_attn.q_proj.weight": (q_rows, hidden),
        "self_attn.k_proj.weight": (kv_rows, hidden),
        "self_attn.v_proj.weight": (kv_rows, hidden),
        "self_attn.o_proj.weight": (hidden, q_rows),
        "post_attention_layernorm.weight": (hidden,),
        "mlp.gate_proj.weight": (inner, hidden),
        "mlp.up_proj.weight": (inner, hidden),
        "mlp.down_proj.weight": (hidden, inner),
    }
    if config.qkv_bias:
        layer |= {
            "self_attn.q_proj.bias": (q_rows,),
            "self_attn.k_proj.bias": (kv_rows,),
            "self_attn.v_proj.bias": (kv_rows,),
        }
    if config.o_bias:
        layer["self_attn.o_proj.bias"] = (hidden,)
    if config.sandwich_norms:
        layer |= {
            name: (hidden,)
            for name in ("pre_feedforward_layernorm.weight", "post_feedforward_layernorm.weight")
        }
    if config.qk_norm:
        layer |= {name: (config.head_dim,) for name in ("self_attn.q_norm.weight", "self_attn.k_norm.weight")}
    if config.mlp_bias:
        layer |= {
            "mlp.gate_proj.bias": (inner,),
            "mlp.up_proj.bias": (inner,),
            "mlp.down_proj.bias": (hidden,),
        }
    for i in range(config.n_layers):
        shapes |= {f"model.layers.{i}.{name}": shape for name, shape in layer.items()}
    return shapes


def check_shapes(config: ModelConfig, shapes: dict[str, tuple[int, ...]]) -> None:
    """Refuse weights (by HF name, with shapes) that do not fit `config`: a missing, extra or misshapen
    tensor. The tied head may be present or not; HF's saved `rotary_emb.inv_freq` buffers are ignored."""
    expected = expected_shapes(config)
    given = {k: v for k, v in shapes.items() if not k.endswith("rotary_emb.inv_freq")}
    if config.tie_word_embeddings:
        given.pop("lm_head.weight", None)
    missing, unexpected = sorted(expected.keys() - given.keys()), sorted(given.keys() - expected.keys())
    if missing or unexpected:
        raise CheckpointError(
            "The weights do not fit the config: "
            + (f"missing {_first_five(missing)} " if missing else "")
            + (f"unexpected {_first_five(unexpected)}" if unexpected else "")
        )
    for key, shape in expected.items():
        if tuple(given[key]) != shape:
            raise CheckpointError(f"{key} has shape {tuple(given[key])}, the config implies {shape}.")


def _first_five(names: list[str]) -> str:
    return ", ".join(brief(name, 80) for name in names[:5]) + (" …" if len(names) > 5 else "")


@dataclass(frozen=True)
class ModelSize:
    """The memory a model will hold once loaded, known before a weight is read."""

    n_parameters: int
    dtype: torch.dtype
    tokenizer_bytes: int = 0  # its estimated memory (`tokenizer_nbytes`)

    @property
    def nbytes(self) -> int:
        return self.n_parameters * self.dtype.itemsize + self.tokenizer_bytes

    def refuse_past(self, max_bytes: float) -> None:
        """Refuse the model (CheckpointError) if it would hold more than `max_bytes`."""
        if self.nbytes > max_bytes:
            tokenizer = self.tokenizer_bytes
            held = f" and a tokenizer of ~{tokenizer / 1e9:.1f} GB" if tokenizer >= 5e7 else ""
            raise CheckpointError(
                f"it has {self.n_parameters / 1e6:,.0f}M parameters{held}, {self.nbytes / 1e9:.1f} GB in "
                f"{str(self.dtype).removeprefix('torch.')}: above the memory budget of "
                f"{max_bytes / 1e9:g} GB. Pick a smaller model."
            )


# Told a model's size before anything is read (once more when its tokenizer has been counted): it
# raises CheckpointError to refuse the model (`within`), or makes room for it (the app's workspace).
Fits = Callable[[ModelSize], None]


def within(max_bytes: float | None) -> Fits | None:
    """Refuse a model that would hold more than `max_bytes` (None: any fits)."""
    return None if max_bytes is None else lambda size: size.refuse_past(max_bytes)


def check_fits(config: ModelConfig, dtype: torch.dtype, fits: Fits | None, tokenizer_bytes: int = 0) -> None:
    """Tell `fits` the size of the model the config builds, in `dtype`, with its tokenizer."""
    if fits is not None:
        n_parameters = sum(math.prod(shape) for shape in expected_shapes(config).values())
        fits(ModelSize(n_parameters, dtype, tokenizer_bytes))


def tokenizer_nbytes(vocab: int, merges: int, added: int = 0, added_bytes: int = 0) -> int:
    """Memory a built tokenizer holds, estimated from what it counts: measured at 170-200 bytes per
    vocabulary entry and merge (a 262,144-token BPE: +90 MB resting), and for added tokens ~2 KB each,
    most of it the matcher over their text (16,384 tokens of 110 characters: +34 MB)."""
    return 200 * (vocab + merges + added) + 24 * added_bytes


def from_hf_state_dict(hf_state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """HF Llama keys (`model.layers.0...`, `lm_head.weight`) -> ours (`layers.0...`)."""
    return {
        key.removeprefix("model."): value
        for key, value in hf_state.items()
        if not key.endswith("rotary_emb.inv_freq")
    }


def to_hf_state_dict(model: Transformer) -> dict[str, torch.Tensor]:
    """Our weights under HF Llama keys, tied head left out, ready for `save_file`."""
    state = {}
    for key, value in model.state_dict().items():
        if key == "lm_head.weight" and model.config.tie_word_embeddings:
            continue
        hf_key = key if key.startswith("lm_head.") else f"model.{key}"
        state[hf_key] = value.detach().contiguous().cpu()
    return state


def build_model(config: ModelConfig, hf_state: dict[str, torch.Tensor], dtype=torch.float32) -> Transformer:
    """Our model holding `hf_state` (HF Llama names) in `dtype`, its shapes checked first."""
    check_shapes(config, {key: tuple(value.shape) for key, value in hf_state.items()})
    with torch.device("meta"):
        model = Transformer(config)
    state = from_hf_state_dict(hf_state)
    if config.tie_word_embeddings:
        state.pop("lm_head.weight", None)
    model.load_state_dict({k: v.to(dtype) for k, v in state.items()}, strict=False, assign=True)
    if config.tie_word_embeddings:
        model.lm_head.weight = model.embed_tokens.weight
    return model.eval()

"""ModelConfig: everything a Llama-family decoder needs, validated once.

`from_hf_config` reads a Hugging Face `config.json` (llama, mistral, qwen2, qwen3, gemma3_text) and refuses,
by name, any feature this engine does not implement, so a checkpoint never loads into a silently different
model.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from explorer.engine.values import (
    SIZE_LIMITS,
    brief,
    brief_count,
    check_size,
    is_integer,
    is_number,
    mapping,
    number_in_range,
    single_id,
    whole,
)
from explorer.errors import UnsupportedConfigError

__all__ = ["ModelConfig", "RopeScaling", "brief", "brief_count"]

SUPPORTED_MODEL_TYPES = ("llama", "mistral", "qwen2", "qwen3", "gemma3_text")
# Relatives of the supported families that need what this engine does not implement, named in the refusal.
UNSUPPORTED_VARIANTS = {
    "qwen3_moe": "Qwen3-MoE's mixture-of-experts MLPs (this engine runs dense MLPs only)",
    "qwen2_moe": "Qwen2-MoE's mixture-of-experts MLPs (this engine runs dense MLPs only)",
    "mixtral": "Mixtral's mixture-of-experts MLPs (this engine runs dense MLPs only)",
    "gemma3": "Gemma 3's vision tower (Gemma3ForConditionalGeneration; text-only gemma3_text loads)",
    "gemma3n": "Gemma 3n's per-layer embeddings and AltUp (this engine runs gemma3_text)",
    "gemma2": "Gemma 2's attention logit soft-capping (this engine runs gemma3_text)",
}
SLIDING, FULL = "sliding_attention", "full_attention"  # layer_types, as HF names them
SUPPORTED_ROPE_TYPES = ("default", "linear", "llama3")
# hidden_act -> ours: silu (SwiGLU) or gelu_tanh (GeGLU, Gemma)
SUPPORTED_ACTIVATIONS = {"silu": "silu", "gelu_pytorch_tanh": "gelu_tanh", "gelu_tanh": "gelu_tanh"}


@dataclass(frozen=True)
class RopeScaling:
    """How RoPE frequencies are rescaled for long context (`rope_type` as in HF transformers)."""

    rope_type: str = "default"
    factor: float = 1.0
    # llama3 only: the band between these wavelengths is blended between scaled and unscaled.
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_position_embeddings: int = 8192

    def __post_init__(self):
        if self.rope_type not in SUPPORTED_ROPE_TYPES:
            raise UnsupportedConfigError(
                f"RoPE scaling type {brief(self.rope_type)} is not supported "
                f"(supported: {', '.join(SUPPORTED_ROPE_TYPES)})."
            )
        for name in ("factor", "low_freq_factor", "high_freq_factor"):
            object.__setattr__(self, name, number_in_range(f"rope scaling {name}", getattr(self, name)))
        check_size("original_max_position_embeddings", self.original_max_position_embeddings)
        if self.rope_type == "llama3" and self.high_freq_factor <= self.low_freq_factor:
            raise ValueError("llama3 rope scaling needs high_freq_factor > low_freq_factor")


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int
    hidden_size: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    intermediate_size: int
    head_dim: int = 0  # 0: derived as hidden_size // n_heads
    max_position_embeddings: int = 2048
    rope_theta: float = 10000.0
    rope_scaling: RopeScaling = field(default_factory=RopeScaling)
    rope_freq_factors: tuple[float, ...] | None = None  # per-pair divisors of θ_i (GGUF `rope_freqs`)
    rms_norm_eps: float = 1e-5
    tie_word_embeddings: bool = False
    qkv_bias: bool = False  # llama `attention_bias`, always on in qwen2
    o_bias: bool = False  # llama `attention_bias` only
    mlp_bias: bool = False
    qk_norm: bool = False  # qwen3: queries and keys RMS-normed over each head before RoPE
    sliding_window: int | None = None  # attention window; without layer_types context is capped to it
    # Per layer "sliding_attention" (a query sees the sliding_window keys up to itself) or "full_attention";
    # None: every layer alike (gemma3_text: five sliding layers to one full)
    layer_types: tuple[str, ...] | None = None
    sliding_rope_theta: float | None = None  # the sliding layers' own RoPE base (None: rope_theta)
    sliding_rope_scaling: RopeScaling = field(default_factory=RopeScaling)
    activation: str = "silu"  # the MLP's gate: silu (SwiGLU) or gelu_tanh (GeGLU)
    query_pre_attn_scalar: float | None = None  # scores scaled by its −½ power (None: head_dim)
    embedding_scale: float = 1.0  # the embeddings times this (√hidden in Gemma)
    norm_offset: float = 0.0  # RMSNorm scales by offset + weight (1 in Gemma), computed in float32
    sandwich_norms: bool = False  # norms after attention and after the MLP too (Gemma's four a block)
    final_logit_softcapping: float | None = None  # logits = cap · tanh(logits / cap)
    model_type: str = "llama"
    bos_token_id: int | None = None
    eos_token_id: int | None = None

    def __post_init__(self):
        self._check_sizes()
        if self.head_dim == 0:
            if self.hidden_size % self.n_heads:
                raise ValueError(
                    f"hidden_size {self.hidden_size} is not divisible by n_heads {self.n_heads}; "
                    "give head_dim explicitly"
                )
            object.__setattr__(self, "head_dim", self.hidden_size // self.n_heads)
        for name in ("rope_scaling", "sliding_rope_scaling"):
            if isinstance(getattr(self, name), dict):
                object.__setattr__(self, name, RopeScaling(**getattr(self, name)))
        self._check_layer_types()
        if self.n_heads % self.n_kv_heads:
            raise ValueError(
                f"n_heads {self.n_heads} must be a multiple of n_kv_heads {self.n_kv_heads} "
                "(each key/value head serves an equal group of query heads)"
            )
        if self.head_dim % 2:
            raise ValueError(f"head_dim must be even for RoPE, got {self.head_dim}")
        if self.rope_freq_factors is not None:
            self._check_freq_factors()

    def _check_sizes(self) -> None:
        """Every size a whole number within SIZE_LIMITS (head_dim 0: derived), every other number
        finite within NUMBER_RANGES, before any is used."""
        for name in SIZE_LIMITS:
            value = getattr(self, name)
            if (name == "sliding_window" and value is None) or (name == "head_dim" and value == 0):
                continue
            check_size(name, value)
        for name in ("bos_token_id", "eos_token_id"):
            value = getattr(self, name)
            if value is not None and not is_integer(value):
                raise ValueError(f"{name} must be a whole number or null, got {brief(value)}")
        for name in ("rope_theta", "rms_norm_eps", "embedding_scale"):
            object.__setattr__(self, name, number_in_range(name, getattr(self, name)))
        for name in ("sliding_rope_theta", "query_pre_attn_scalar", "final_logit_softcapping"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, number_in_range(name, getattr(self, name)))
        if self.activation not in SUPPORTED_ACTIVATIONS.values():
            raise UnsupportedConfigError(f"activation {brief(self.activation)} is not supported")

    def _check_layer_types(self) -> None:
        if self.layer_types is None:
            return
        types = tuple(self.layer_types)
        object.__setattr__(self, "layer_types", types)
        if len(types) != self.n_layers or not all(t in (SLIDING, FULL) for t in types):
            raise ValueError(
                f"layer_types must name {self.n_layers} layers, each {SLIDING!r} or {FULL!r}, "
                f"got {brief(types)}"
            )
        if SLIDING in types and self.sliding_window is None:
            raise ValueError("sliding_attention layers need a sliding_window")

    def _check_freq_factors(self) -> None:
        factors = self.rope_freq_factors
        pairs = self.head_dim // 2
        if len(factors) != pairs or not all(is_number(f) and 0 < f < math.inf for f in factors):
            raise ValueError(
                f"rope_freq_factors must be {pairs} finite positive numbers, got {len(factors):,} "
                f"starting {brief(tuple(factors[:4]))}"
            )

    @property
    def group_size(self) -> int:
        """Query heads per key/value head (1: multi-head, n_heads: multi-query)."""
        return self.n_heads // self.n_kv_heads

    def window(self, layer: int) -> int | None:
        """How many keys up to itself a query of `layer` sees: its sliding window, or None (all of them,
        the causal mask). Without layer_types every layer is full (a uniform window caps the context)."""
        if self.layer_types is None or self.layer_types[layer] == FULL:
            return None
        return self.sliding_window

    @property
    def attention_scale(self) -> float:
        """What Q·Kᵀ is multiplied by: 1/√head_dim, or 1/√query_pre_attn_scalar where the model sets it."""
        return (self.query_pre_attn_scalar or self.head_dim) ** -0.5

    @property
    def context_length(self) -> int:
        """Longest prompt we run. Within a sliding window, windowed and full causal attention agree,
        so a model windowed in every layer (mistral) is exact here up to its window; one with
        layer_types applies each sliding layer's window itself."""
        if self.sliding_window is None or self.layer_types is not None:
            return self.max_position_embeddings
        return min(self.max_position_embeddings, self.sliding_window)

    @classmethod
    def from_hf_config(cls, hf: dict[str, Any]) -> ModelConfig:
        """Build from a Hugging Face `config.json` dict (model_type llama, mistral, qwen2 or qwen3)."""
        model_type = hf.get("model_type")
        if model_type in UNSUPPORTED_VARIANTS:
            raise UnsupportedConfigError(
                f"model_type {brief(model_type)} needs {UNSUPPORTED_VARIANTS[model_type]}: not supported."
            )
        if model_type not in SUPPORTED_MODEL_TYPES:
            raise UnsupportedConfigError(
                f"model_type {brief(model_type)} is not supported "
                f"(supported: {', '.join(SUPPORTED_MODEL_TYPES)})."
            )
        if model_type == "gemma3_text":
            return cls._from_gemma3(hf)
        activation = hf.get("hidden_act", "silu")
        if activation != "silu":
            raise UnsupportedConfigError(f"hidden_act {brief(activation)} is not supported (only silu).")
        if hf.get("pretraining_tp", 1) not in (1, None):
            raise UnsupportedConfigError("pretraining_tp > 1 is not supported.")

        n_heads = hf["num_attention_heads"]
        llama_bias = bool(hf.get("attention_bias", False))  # qwen3's too: q, k, v and o
        return cls(
            vocab_size=hf["vocab_size"],
            hidden_size=hf["hidden_size"],
            n_layers=hf["num_hidden_layers"],
            n_heads=n_heads,
            n_kv_heads=hf.get("num_key_value_heads") or n_heads,
            intermediate_size=hf["intermediate_size"],
            head_dim=hf.get("head_dim") or 0,
            max_position_embeddings=hf.get("max_position_embeddings", 2048),
            rope_theta=_rope_parameters(hf).get("rope_theta", 10000.0),
            rope_scaling=_rope_scaling(hf),
            rms_norm_eps=hf.get("rms_norm_eps", 1e-6),
            tie_word_embeddings=bool(hf.get("tie_word_embeddings", False)),
            qkv_bias=True if model_type == "qwen2" else llama_bias,
            o_bias=llama_bias if model_type in ("llama", "qwen3") else False,
            qk_norm=model_type == "qwen3",
            mlp_bias=bool(hf.get("mlp_bias", False)) if model_type == "llama" else False,
            sliding_window=_sliding_window(hf),
            model_type=model_type,
            bos_token_id=single_id(hf.get("bos_token_id")),
            eos_token_id=single_id(hf.get("eos_token_id")),
        )

    @classmethod
    def _from_gemma3(cls, hf: dict[str, Any]) -> ModelConfig:
        """Gemma 3 text (Gemma3ForCausalLM): GeGLU, (1 + w) norms four a block, embeddings × √hidden,
        QK-norm, query_pre_attn_scalar, sliding and full layers with their own RoPE bases."""
        for name, what in (
            ("attn_logit_softcapping", "attention logit soft-capping"),
            ("use_bidirectional_attention", "bidirectional attention"),
        ):
            if hf.get(name):
                raise UnsupportedConfigError(f"{name}: {what} is not supported.")
        activation = hf.get("hidden_activation") or hf.get("hidden_act") or "gelu_pytorch_tanh"
        if SUPPORTED_ACTIVATIONS.get(activation) != "gelu_tanh":
            raise UnsupportedConfigError(f"hidden_activation {brief(activation)} is not supported here.")
        n_heads, hidden, n_layers = hf["num_attention_heads"], hf["hidden_size"], hf["num_hidden_layers"]
        check_size("n_layers", n_layers)  # before anything is built layer by layer
        layer_types = hf.get("layer_types") or _gemma3_layer_types(
            n_layers, hf.get("sliding_window_pattern", 6)
        )
        if not isinstance(layer_types, list | tuple):
            raise ValueError(f"layer_types must be a list, got {brief(layer_types)}")
        params = mapping("rope_parameters", hf.get("rope_parameters"))
        full = mapping(f"rope_parameters[{FULL!r}]", params.get(FULL)) or {
            "rope_theta": hf.get("rope_theta", 1e6),
            **mapping("rope_scaling", hf.get("rope_scaling")),
        }
        local = mapping(f"rope_parameters[{SLIDING!r}]", params.get(SLIDING)) or {
            "rope_theta": hf.get("rope_local_base_freq", 1e4)
        }
        bias = bool(hf.get("attention_bias", False))
        return cls(
            vocab_size=hf["vocab_size"],
            hidden_size=hidden,
            n_layers=n_layers,
            n_heads=n_heads,
            n_kv_heads=hf.get("num_key_value_heads") or n_heads,
            intermediate_size=hf["intermediate_size"],
            head_dim=hf.get("head_dim") or 0,
            max_position_embeddings=hf.get("max_position_embeddings", 131072),
            rope_theta=full.get("rope_theta", 1e6),
            rope_scaling=_rope_scaling({"rope_parameters": full}),
            sliding_rope_theta=local.get("rope_theta", 1e4),
            sliding_rope_scaling=_rope_scaling({"rope_parameters": local}),
            rms_norm_eps=hf.get("rms_norm_eps", 1e-6),
            tie_word_embeddings=bool(hf.get("tie_word_embeddings", True)),
            qkv_bias=bias,
            o_bias=bias,
            qk_norm=True,
            sliding_window=whole(hf["sliding_window"]) if hf.get("sliding_window") else None,
            layer_types=tuple(layer_types),
            activation="gelu_tanh",
            query_pre_attn_scalar=hf.get("query_pre_attn_scalar"),
            embedding_scale=float(hidden) ** 0.5,
            norm_offset=1.0,
            sandwich_norms=True,
            final_logit_softcapping=hf.get("final_logit_softcapping"),
            model_type="gemma3_text",
            bos_token_id=single_id(hf.get("bos_token_id")),
            eos_token_id=single_id(hf.get("eos_token_id")),
        )

    def to_hf_config(self) -> dict[str, Any]:
        """A `config.json` dict in Hugging Face Llama layout, loadable by `transformers`."""
        if (
            self.model_type != "llama"
            or self.o_bias != self.qkv_bias
            or self.sliding_window
            or self.rope_freq_factors
        ):
            raise UnsupportedConfigError("only plain llama configs are written back to HF layout")
        scaling = None
        if self.rope_scaling.rope_type != "default":
            scaling = {k: v for k, v in asdict(self.rope_scaling).items() if v is not None}
        return {
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "num_hidden_layers": self.n_layers,
            "num_attention_heads": self.n_heads,
            "num_key_value_heads": self.n_kv_heads,
            "head_dim": self.head_dim,
            "intermediate_size": self.intermediate_size,
            "max_position_embeddings": self.max_position_embeddings,
            "rope_theta": self.rope_theta,
            "rope_scaling": scaling,
            "rms_norm_eps": self.rms_norm_eps,
            "tie_word_embeddings": self.tie_word_embeddings,
            "attention_bias": self.qkv_bias,
            "mlp_bias": self.mlp_bias,
            "hidden_act": "silu",
            "bos_token_id": self.bos_token_id,
            "eos_token_id": self.eos_token_id,
            "torch_dtype": "float32",
        }


def _gemma3_layer_types(n_layers: int, pattern: Any) -> list[str]:
    """Gemma 3's layers before `layer_types` was written: every `pattern`-th one full, the rest sliding."""
    if not is_integer(pattern) or not 1 <= pattern <= SIZE_LIMITS["n_layers"]:
        raise ValueError(
            f"sliding_window_pattern must be a whole number from 1 to {SIZE_LIMITS['n_layers']}, "
            f"got {brief(pattern)}"
        )
    return [FULL if (i + 1) % pattern == 0 else SLIDING for i in range(n_layers)]


def _rope_parameters(hf: dict[str, Any]) -> dict[str, Any]:
    """transformers 5 writes `rope_parameters`; 4.x wrote `rope_theta` + `rope_scaling`."""
    merged = {"rope_theta": hf.get("rope_theta", 10000.0)}
    merged.update(mapping("rope_scaling", hf.get("rope_scaling")))
    merged.update(mapping("rope_parameters", hf.get("rope_parameters")))
    return merged


def _rope_scaling(hf: dict[str, Any]) -> RopeScaling:
    params = _rope_parameters(hf)
    rope_type = params.get("rope_type", params.get("type", "default"))
    if rope_type not in SUPPORTED_ROPE_TYPES:
        raise UnsupportedConfigError(
            f"RoPE scaling type {brief(rope_type)} is not supported "
            f"(supported: {', '.join(SUPPORTED_ROPE_TYPES)})."
        )
    if rope_type == "default":
        return RopeScaling()
    fields = {"rope_type": rope_type, "factor": params["factor"]}
    if rope_type == "llama3":
        fields.update(
            low_freq_factor=params["low_freq_factor"],
            high_freq_factor=params["high_freq_factor"],
            original_max_position_embeddings=params["original_max_position_embeddings"],
        )
    return RopeScaling(**fields)


def _sliding_window(hf: dict[str, Any]) -> int | None:
    if hf.get("model_type") in ("qwen2", "qwen3") and not hf.get("use_sliding_window", False):
        return None
    window = hf.get("sliding_window")
    return whole(window) if window else None

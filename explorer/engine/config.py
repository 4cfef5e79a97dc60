"""ModelConfig: everything a Llama-family decoder needs, validated once.

`from_hf_config` reads a Hugging Face `config.json` (llama, mistral, qwen2, qwen3) and refuses, by name, any
feature this engine does not implement, so a checkpoint never loads into a silently different model.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from explorer.errors import UnsupportedConfigError

SUPPORTED_MODEL_TYPES = ("llama", "mistral", "qwen2", "qwen3")
# Relatives of the supported families that need what this engine does not implement, named in the refusal.
UNSUPPORTED_VARIANTS = {
    "qwen3_moe": "Qwen3-MoE's mixture-of-experts MLPs (this engine runs dense MLPs only)",
    "qwen2_moe": "Qwen2-MoE's mixture-of-experts MLPs (this engine runs dense MLPs only)",
    "mixtral": "Mixtral's mixture-of-experts MLPs (this engine runs dense MLPs only)",
}
SUPPORTED_ROPE_TYPES = ("default", "linear", "llama3")
SUPPORTED_ACTIVATIONS = ("silu",)
# Upper bounds on a config's sizes, far above every Llama-family model released (Llama 3.1 405B has
# 126 layers, width 16,384, 128 heads, FFN 53,248; Gemma's vocabulary is 262,144), so a config that
# claims a million layers is refused before anything is built for it.
SIZE_LIMITS = {
    "vocab_size": 1 << 20,
    "hidden_size": 1 << 15,
    "n_layers": 256,
    "n_heads": 256,
    "n_kv_heads": 256,
    "intermediate_size": 1 << 18,
    "head_dim": 1024,
    "max_position_embeddings": 1 << 24,
    "sliding_window": 1 << 24,
}
# The numbers a config may hold that are not sizes, each finite within (low, high]: wide around every
# released model (θ from 10,000 to 1e9 in Llama 4; ε from 1e-6 to 1e-5), narrow enough that
# NaN, infinity, zero or a negative never reaches the model.
NUMBER_RANGES = {
    "rope_theta": (1.0, 1e12),
    "rms_norm_eps": (0.0, 1.0),
    "rope scaling factor": (0.0, 1e6),
    "rope scaling low_freq_factor": (0.0, 1e6),
    "rope scaling high_freq_factor": (0.0, 1e6),
}


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
            object.__setattr__(self, name, _number_in_range(f"rope scaling {name}", getattr(self, name)))
        _check_size("original_max_position_embeddings", self.original_max_position_embeddings)
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
    sliding_window: int | None = None  # attention window; context is capped to it (see context_length)
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
        if isinstance(self.rope_scaling, dict):
            object.__setattr__(self, "rope_scaling", RopeScaling(**self.rope_scaling))
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
            _check_size(name, value)
        for name in ("bos_token_id", "eos_token_id"):
            value = getattr(self, name)
            if value is not None and not _is_integer(value):
                raise ValueError(f"{name} must be a whole number or null, got {brief(value)}")
        for name in ("rope_theta", "rms_norm_eps"):
            object.__setattr__(self, name, _number_in_range(name, getattr(self, name)))

    def _check_freq_factors(self) -> None:
        factors = self.rope_freq_factors
        pairs = self.head_dim // 2
        if len(factors) != pairs or not all(_is_number(f) and 0 < f < math.inf for f in factors):
            raise ValueError(
                f"rope_freq_factors must be {pairs} finite positive numbers, got {len(factors):,} "
                f"starting {brief(tuple(factors[:4]))}"
            )

    @property
    def group_size(self) -> int:
        """Query heads per key/value head (1: multi-head, n_heads: multi-query)."""
        return self.n_heads // self.n_kv_heads

    @property
    def context_length(self) -> int:
        """Longest prompt we run. Within a sliding window, windowed and full causal attention agree,
        so a windowed model is exact here up to its window."""
        if self.sliding_window is None:
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
        activation = hf.get("hidden_act", "silu")
        if activation not in SUPPORTED_ACTIVATIONS:
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
            bos_token_id=_single_id(hf.get("bos_token_id")),
            eos_token_id=_single_id(hf.get("eos_token_id")),
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


def _rope_parameters(hf: dict[str, Any]) -> dict[str, Any]:
    """transformers 5 writes `rope_parameters`; 4.x wrote `rope_theta` + `rope_scaling`."""
    merged = {"rope_theta": hf.get("rope_theta", 10000.0)}
    merged.update(hf.get("rope_scaling") or {})
    merged.update(hf.get("rope_parameters") or {})
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
    return int(window) if window else None


def brief(value: Any, most: int = 40) -> str:
    """A value from a checkpoint as a message quotes it: its repr, cut to `most` characters."""
    if isinstance(value, int) and not isinstance(value, bool):
        return brief_count(value, most)
    text = repr(value)
    return text if len(text) <= most else text[: most - 1] + "…"


def brief_count(value: int, most: int = 40) -> str:
    """A whole number as a message quotes it: with thousands separators, cut to `most` characters
    and its length in digits given when it is longer."""
    if value.bit_length() > 14_000:  # past Python's 4,300-digit limit on writing an int in decimal
        return "a number of over 4,000 digits"
    text = f"{value:,}"
    if len(text) <= most:
        return text
    return f"{text[: most - 16]}… ({len(str(abs(value))):,} digits)"


def _check_size(name: str, value: Any) -> None:
    """A whole number from 1 to its SIZE_LIMITS bound (`original_max_position_embeddings`: a context)."""
    limit = SIZE_LIMITS.get(name, SIZE_LIMITS["max_position_embeddings"])
    if not _is_integer(value):
        raise ValueError(f"{name} must be a whole number, got {brief(value)}")
    if value > limit:
        raise ValueError(f"{name} is {brief_count(value)}; this engine reads at most {limit:,}")
    if value <= 0:
        raise ValueError(f"{name} must be positive, got {brief_count(value)}")


def _number_in_range(name: str, value: Any) -> float:
    """`value` as a float, if it is a finite number within NUMBER_RANGES[name]: (low, high]."""
    low, high = NUMBER_RANGES[name]
    if not (_is_number(value) and low < value <= high):
        shown = ", ".join(f"{bound:g}".replace("e+0", "e").replace("e+", "e") for bound in (low, high))
        raise ValueError(f"{name} must be a finite number in ({shown}], got {brief(value)}")
    return float(value)


def _is_integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _single_id(token_id: int | list[int] | None) -> int | None:
    if isinstance(token_id, list):
        return token_id[0] if token_id else None
    return token_id

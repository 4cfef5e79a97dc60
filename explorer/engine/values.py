"""How a config's values are checked and quoted: whole numbers within limits, finite numbers within
ranges, and a value from a checkpoint cut short enough to put in a message."""

from __future__ import annotations

from typing import Any

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
    "sliding_rope_theta": (1.0, 1e12),
    # Each lower bound keeps what the model computes from the number finite in float32: a scale of
    # query_pre_attn_scalar^-½, logits capped by cap·tanh(x / cap), a norm's 1/√(mean + ε) of a zero
    # stream, θ / factor (released models: 144 to 256; 30; 1e-6 to 1e-5; 2 to 64).
    "query_pre_attn_scalar": (1e-3, 1e6),
    "final_logit_softcapping": (1e-3, 1e6),
    "embedding_scale": (0.0, 1e6),
    "rms_norm_eps": (1e-30, 1.0),
    "rope scaling factor": (1e-3, 1e6),
    "rope scaling low_freq_factor": (1e-3, 1e6),
    "rope scaling high_freq_factor": (1e-3, 1e6),
}


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


def check_size(name: str, value: Any) -> None:
    """A whole number from 1 to its SIZE_LIMITS bound (`original_max_position_embeddings`: a context)."""
    limit = SIZE_LIMITS.get(name, SIZE_LIMITS["max_position_embeddings"])
    if not is_integer(value):
        raise ValueError(f"{name} must be a whole number, got {brief(value)}")
    if value > limit:
        raise ValueError(f"{name} is {brief_count(value)}; this engine reads at most {limit:,}")
    if value <= 0:
        raise ValueError(f"{name} must be positive, got {brief_count(value)}")


def number_in_range(name: str, value: Any) -> float:
    """`value` as a float, if it is a finite number within NUMBER_RANGES[name]: (low, high]."""
    low, high = NUMBER_RANGES[name]
    if not (is_number(value) and low < value <= high):
        shown = ", ".join(f"{bound:g}".replace("e+0", "e").replace("e+", "e") for bound in (low, high))
        raise ValueError(f"{name} must be a finite number in ({shown}], got {brief(value)}")
    return float(value)


def is_integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def whole(value: Any) -> Any:
    """A size as JSON may write it: an integral float (4096.0) as the int it names; anything else as it
    is, for `check_size` to refuse by name (Infinity, 4.5, "4096")."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def mapping(name: str, value: Any) -> dict:
    """A config's nested object (rope_parameters, rope_scaling): a dict, {} when absent, else refused."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"{name} must be a JSON object, got {brief(value)}")
    return value


def single_id(token_id: int | list[int] | None) -> int | None:
    if isinstance(token_id, list):
        return token_id[0] if token_id else None
    return token_id

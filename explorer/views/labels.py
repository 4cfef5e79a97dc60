"""How the app names heads and positions: a head with the key/value head it reads, and a position kept
within the prompt."""

from __future__ import annotations

import numpy as np

from explorer.engine.attention import kv_head_map
from explorer.engine.config import ModelConfig
from explorer.engine.run import Run


def head_name(config: ModelConfig, head: int) -> str:
    """A query head with the key/value head it reads, as the app names it: "head 5 · kv 1"."""
    return f"head {head} · kv {kv_heads(config)[head]}"


def layer_head_name(config: ModelConfig, layer: int, head: int) -> str:
    """A head among every layer's, as the Intervene tab lists it: "3.5 · kv 1"."""
    return f"{layer}.{head} · kv {kv_heads(config)[head]}"


def kv_heads(config: ModelConfig) -> np.ndarray:
    """Which kv head each query head reads.  # [H] int64"""
    return kv_head_map(config.n_heads, config.n_kv_heads).numpy()


def clamp_position(run: Run, position: int | float | None) -> int:
    return int(min(max(int(position or 0), 0), run.n_tokens - 1))

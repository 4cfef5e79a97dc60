"""How the app names heads, layers and positions: a head with the key/value head it reads, a layer of a
model with both sliding and global layers by its kind, and a position kept within the prompt."""

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


def global_layers(config: ModelConfig) -> list[int]:
    """The layers that see every earlier key, in a model whose other layers slide over a window (Gemma
    3: every sixth); none where every layer is of one kind (Llama, or Mistral's window in every layer)."""
    full = [layer for layer in range(config.n_layers) if config.window(layer) is None]
    return full if 0 < len(full) < config.n_layers else []


def layer_title(config: ModelConfig, layer: int) -> str:
    """A layer as titles name it: "Layer 3", and where the model has both kinds "Layer 5 (global)" or
    "Layer 0 (sliding, 512 keys)"."""
    if not global_layers(config):
        return f"Layer {layer}"
    window = config.window(layer)
    return f"Layer {layer} (global)" if window is None else f"Layer {layer} (sliding, {window:,} keys)"


def kv_heads(config: ModelConfig) -> np.ndarray:
    """Which kv head each query head reads.  # [H] int64"""
    return kv_head_map(config.n_heads, config.n_kv_heads).numpy()


def clamp_position(run: Run, position: int | float | None) -> int:
    return int(min(max(int(position or 0), 0), run.n_tokens - 1))

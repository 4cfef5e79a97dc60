"""The GQA tab's views: which query heads share which kv head, and what the KV cache costs."""

from __future__ import annotations

from explorer import figures
from explorer.engine.config import ModelConfig
from explorer.figures.plot import Plot
from explorer.views.labels import kv_heads


def gqa_diagram(config: ModelConfig) -> Plot:
    return figures.gqa_diagram_figure.plot(kv_heads(config))


def kv_cache_bytes_per_token(config: ModelConfig, n_kv_heads: int, bytes_per_value: int) -> int:
    """K and V, every layer, one token."""
    return 2 * config.n_layers * n_kv_heads * config.head_dim * bytes_per_value


def kv_cache_contexts(config: ModelConfig, count: int = 6) -> tuple[int, ...]:
    """The contexts the KV-cache chart shows: halving down from the model's own context."""
    context = config.context_length
    return tuple(sorted({max(context >> k, 1) for k in range(count)}))


def kv_cache(config: ModelConfig, bytes_per_value: int, current: tuple[int, int] | None = None) -> Plot:
    """`current`: (tokens in a live cache, its bytes), shown beside MHA and MQA at that length."""
    layouts = {
        f"this model ({config.n_kv_heads} kv heads)": config.n_kv_heads,
        f"as MHA ({config.n_heads} kv heads)": config.n_heads,
        "as MQA (1 kv head)": 1,
    }
    per_token = {name: kv_cache_bytes_per_token(config, n, bytes_per_value) for name, n in layouts.items()}
    return figures.kv_cache_figure.plot(per_token, kv_cache_contexts(config), current)

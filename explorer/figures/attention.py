"""The attention maps of one layer: one head stage by stage, and every head side by side."""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from explorer.figures.common import (
    encode_mask,
    encode_probs,
    encode_signed,
    group_colour,
    house_template,
    link_axes,
    map_heatmap,
    mask_heatmap,
    masked_region,
)

ALL_HEADS_BUDGET_BYTES = 128 * 1024  # every head's map together
MASKED_HOVER = "−∞: the key comes after the query"


def pipeline_figure(
    tokens: list[str],
    scores: np.ndarray,  # [N, N] Q·Kᵀ after RoPE
    scaled: np.ndarray,  # [N, N] scores · scale
    mask: np.ndarray,  # [N, N] bool, True where the query may attend
    masked: np.ndarray,  # [N, N] scaled, −inf where masked
    probs: np.ndarray,  # [N, N] softmax of masked
    scale: float,
    title: str,
) -> go.Figure:
    """Q·Kᵀ → scaled → causal mask → masked → softmax, side by side on shared token axes."""
    n = len(tokens)
    scaled_map = encode_signed(scaled)
    maps = {
        "q·k": encode_signed(scores),
        "scaled": scaled_map,
        "mask": None,
        "masked": encode_signed(masked, limit=scaled_map.limit),
        "p": encode_probs(probs),
    }
    titles = ["Q·Kᵀ", f"scaled × 1/√d = {scale:.4g}", "causal mask", "masked (−∞ hatched)", "softmax"]
    fig = make_subplots(
        rows=1, cols=len(maps), shared_yaxes=True, horizontal_spacing=0.02, subplot_titles=titles
    )
    for col, (name, encoded) in enumerate(maps.items(), start=1):
        if encoded is None:
            fig.add_trace(mask_heatmap(*encode_mask(mask)), row=1, col=col)
        else:
            fig.add_trace(map_heatmap(encoded, name, _colorbar_under(fig, col)), row=1, col=col)
        if name in ("mask", "masked") and n > 1:
            fig.add_trace(masked_region(n, MASKED_HOVER), row=1, col=col)
    note = maps["q·k"].note
    link_axes(fig)
    fig.update_xaxes(range=[-0.5, n - 0.5], tickangle=-90, title_text="key")
    fig.update_yaxes(range=[n - 0.5, -0.5])
    fig.update_yaxes(title_text="query", row=1, col=1)
    fig.update_layout(
        template=house_template(tokens),
        title=dict(text=title + (f"<br><sup>{note}</sup>" if note else "")),
        height=440,
        margin=dict(l=70, r=20, t=80, b=140),
    )
    return fig


def _colorbar_under(fig: go.Figure, col: int) -> dict:
    """A horizontal colour bar below subplot `col`, as wide as it."""
    start, end = fig.get_subplot(1, col).xaxis.domain
    return dict(orientation="h", x=(start + end) / 2, xanchor="center", len=0.9 * (end - start), y=-0.45)


def group_columns(n_heads: int, group_size: int, most: int = 8) -> int:
    """Columns for the small multiples: whole kv groups per row while a row holds at most `most`."""
    if group_size >= most:
        return most
    return min(n_heads, group_size * (most // group_size))


def all_heads_figure(
    tokens: list[str],
    probs: np.ndarray,  # [H, N, N] the layer's softmax maps
    kv_head: np.ndarray,  # [H] which kv head each query head reads
    title: str,
) -> go.Figure:
    """Every head's softmax map as small multiples, framed and coloured by the kv head they share."""
    n_heads, n = probs.shape[0], len(tokens)
    group_size = n_heads // (int(kv_head.max()) + 1)
    cols = group_columns(n_heads, group_size)
    rows = math.ceil(n_heads / cols)
    maps = [encode_probs(p, ALL_HEADS_BUDGET_BYTES // n_heads) for p in probs]
    fig = make_subplots(
        rows=rows,
        cols=cols,
        horizontal_spacing=0.015,
        vertical_spacing=0.1 / rows,
        subplot_titles=[f"head {h} · kv {kv_head[h]}" for h in range(n_heads)],
    )
    for h, encoded in enumerate(maps):
        bar = dict(thickness=10, len=0.8) if h == 0 else None
        fig.add_trace(map_heatmap(encoded, "p", bar), row=h // cols + 1, col=h % cols + 1)
    for h, annotation in enumerate(fig.layout.annotations):
        annotation.font = dict(size=11, color=group_colour(int(kv_head[h])))
    link_axes(fig)
    fig.update_xaxes(range=[-0.5, n - 0.5], showticklabels=False, ticks="")
    fig.update_yaxes(range=[n - 0.5, -0.5], showticklabels=False, ticks="")
    for h in range(n_heads):
        _frame(fig, h // cols + 1, h % cols + 1, group_colour(int(kv_head[h])))
    note = maps[0].note
    fig.update_layout(
        template=house_template(tokens),
        title=dict(text=title + (f"<br><sup>{note}</sup>" if note else "")),
        height=80 + 190 * rows,
        margin=dict(l=20, r=20, t=80, b=20),
    )
    return fig


def _frame(fig: go.Figure, row: int, col: int, colour: str) -> None:
    subplot = fig.get_subplot(row, col)
    (x0, x1), (y0, y1) = subplot.xaxis.domain, subplot.yaxis.domain
    fig.add_shape(
        type="rect",
        xref="paper",
        yref="paper",
        x0=x0,
        x1=x1,
        y0=y0,
        y1=y1,
        line=dict(color=colour, width=2),
        layer="above",
    )

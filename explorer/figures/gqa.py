"""Grouped-query attention, pictured: which query heads share a key/value head, how alike the heads of
a group attend, and what sharing saves in the KV cache."""

from __future__ import annotations

import math

import numpy as np
from plotly.colors import get_colorscale

from explorer.figures.common import axis_title, figure, group_colour
from explorer.figures.plot import Plot, builds_figure

SIMILARITY_COLORSCALE = get_colorscale("Viridis")
LAYOUT_COLOURS = ("#2563eb", "#9ca3af", "#059669")  # this model, as MHA, as MQA


@builds_figure
def gqa_diagram_figure(kv_head: np.ndarray) -> Plot:
    """Query heads (left) joined to the key/value head each reads (right).  # kv_head [H]"""
    n_heads, n_kv = len(kv_head), int(kv_head.max()) + 1
    data = []
    for g in range(n_kv):
        members = np.flatnonzero(kv_head == g)
        centre = float(members.mean())
        colour = group_colour(g)
        data += [
            dict(
                type="scatter",
                x=np.tile(np.array([0, 1, np.nan], dtype=np.float32), len(members)),
                y=np.stack([members, np.full(len(members), centre), np.full(len(members), np.nan)], 1)
                .ravel()
                .astype(np.float32),
                mode="lines",
                line=dict(color=colour, width=1.5),
                hoverinfo="skip",
            ),
            dict(
                type="scatter",
                x=np.zeros(len(members), dtype=np.float32),
                y=members.astype(np.float32),
                mode="markers+text",
                marker=dict(color=colour, size=14),
                text=[f"head {h}" for h in members],
                textposition="middle left",
                hovertemplate=f"query head %{{y}} reads kv head {g}<extra></extra>",
            ),
            dict(
                type="scatter",
                x=[1.0],
                y=[centre],
                mode="markers+text",
                marker=dict(color=colour, size=20, symbol="square"),
                text=[f"kv {g}"],
                textposition="middle right",
                hovertemplate=f"kv head {g}: its K and V are read by query heads "
                f"{', '.join(str(h) for h in members)}<extra></extra>",
            ),
        ]
    kind = "multi-head" if n_kv == n_heads else "multi-query" if n_kv == 1 else "grouped-query"
    return figure(
        data,
        title=f"{kind.capitalize()} attention: {n_heads} query heads share {n_kv} key/value heads",
        xaxis=dict(visible=False, range=[-0.6, 1.6]),
        yaxis=dict(visible=False, autorange="reversed"),
        showlegend=False,
        height=max(300, 100 + 26 * n_heads),
    )


@builds_figure
def head_similarity_figure(similarity: np.ndarray, kv_head: np.ndarray, title: str) -> Plot:
    """Cosine similarity of every pair of heads' attention maps, ordered by kv group.  # [H, H], [H]"""
    n_heads = len(kv_head)
    order = np.argsort(kv_head, kind="stable")
    sim = similarity[np.ix_(order, order)].astype(np.float32)
    same_group = kv_head[order][:, None] == kv_head[order][None, :]
    pairs_within = same_group & ~np.eye(n_heads, dtype=bool)
    within = sim[pairs_within].mean() if pairs_within.any() else np.nan
    across = sim[~same_group].mean() if (~same_group).any() else np.nan
    shapes = []
    for boundary in np.flatnonzero(np.diff(kv_head[order])) + 0.5:
        edge = dict(type="line", line=dict(color="white", width=2))
        shapes += [
            dict(edge, x0=boundary, x1=boundary, y0=-0.5, y1=n_heads - 0.5),
            dict(edge, y0=boundary, y1=boundary, x0=-0.5, x1=n_heads - 0.5),
        ]
    heatmap = dict(
        type="heatmap",
        z=sim,
        zmin=0,
        zmax=1,
        colorscale=SIMILARITY_COLORSCALE,
        colorbar=dict(thickness=10),
        hovertemplate="%{y} vs head %{x}<br>cosine similarity %{z:.3g}<extra></extra>",
    )
    ticks = dict(tickmode="array", tickvals=list(range(n_heads)), showgrid=False)
    return figure(
        [heatmap],
        title=f"{title}<br><sup>cosine of every pair of maps, heads ordered by kv group;<br>mean within a"
        f" kv group {_fmt(within)}, across groups {_fmt(across)}</sup>",
        shapes=shapes,
        xaxis=dict(ticks, ticktext=[str(h) for h in order], title=dict(text="head")),
        yaxis=dict(ticks, ticktext=[f"head {h} · kv {kv_head[h]}" for h in order], autorange="reversed"),
        height=max(360, 140 + 24 * n_heads),
        margin=dict(t=95, l=110),
    )


def _fmt(value: float) -> str:
    return "—" if np.isnan(value) else f"{value:.3f}"


@builds_figure
def kv_cache_figure(
    bytes_per_token: dict[str, int], contexts: tuple[int, ...], current: tuple[int, int] | None = None
) -> Plot:
    """KV-cache bytes at each context length, one bar group per layout (this model, MHA, MQA).

    With `current` (tokens in a live cache, the bytes it holds), a first group "now" sets that cache's
    actual bytes beside the same length as MHA and MQA."""
    lengths = [current[0], *contexts] if current else list(contexts)
    labels = [f"{c // 1024}k" if c >= 1024 else str(c) for c in contexts]
    if current:
        labels.insert(0, f"now: {current[0]}")
    data = []
    for (name, per_token), colour in zip(bytes_per_token.items(), LAYOUT_COLOURS, strict=True):
        sizes = np.array([per_token * c for c in lengths], dtype=np.float64)
        if current and not data:  # this model: the live cache's bytes, as measured
            sizes[0] = current[1]
        data.append(
            dict(
                type="bar",
                x=labels,
                y=sizes,
                name=f"{name}: {human_bytes(per_token)} per token",
                marker=dict(color=colour),
                text=[human_bytes(s) for s in sizes],
                textposition="outside",
                cliponaxis=False,
                hovertemplate=f"{name}<br>%{{x}} tokens: %{{text}}<extra></extra>",
            )
        )
    rates = bytes_per_token.values()
    smallest, largest = min(rates) * min(lengths), max(rates) * max(lengths)
    now = f"; now: {current[0]} tokens in the cache, {human_bytes(current[1])} measured" if current else ""
    return figure(
        data,
        title="KV cache of the loaded model against the same model as MHA and MQA"
        f"<br><sup>K and V of every layer, at the model's dtype{now}</sup>",
        barmode="group",
        xaxis=dict(title=dict(text="context (tokens)"), type="category"),
        yaxis=dict(title=axis_title("bytes"), automargin=True, type="log", **binary_ticks(smallest, largest)),
        legend=dict(orientation="h", x=0, y=-0.25),
        height=440,
        margin=dict(t=80, b=110),
    )


def binary_ticks(low: float, high: float, max_ticks: int = 6) -> dict:
    """Ticks of a log axis over bytes at powers of two, labelled in KiB, MiB, GiB."""
    exponents = range(math.floor(math.log2(low)), math.ceil(math.log2(high)) + 1)
    step = math.ceil(len(exponents) / max_ticks)
    values = [2.0**e for e in exponents[::step]]
    return dict(tickmode="array", tickvals=values, ticktext=[human_bytes(v) for v in values])


def human_bytes(n: float) -> str:
    units = ("B", "KiB", "MiB", "GiB", "TiB")
    power = 0
    while n >= 1024 and power < len(units) - 1:
        n, power = n / 1024, power + 1
    return f"{n:.0f} B" if power == 0 else f"{n:.3g} {units[power]}"

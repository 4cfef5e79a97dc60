"""Why a head looks there, as pictures: a score split into query-side × key-side sources, a query's row
split into key-side sources at every key, and how much each head reads what an earlier one writes.

Sources are named as the views give them ("head 16.0", "MLP 3", "embedding", "other (120)"). A head
source carries its layer and head (`heads`: [S, 2], −1 for the rest) in the traces' customdata, so a
click on it opens that head (the app's page script).
"""

from __future__ import annotations

import html

import numpy as np
from plotly.colors import get_colorscale

from explorer.figures.common import figure, quoted_token, token_axis
from explorer.figures.plot import Plot, builds_figure

DIVERGING = get_colorscale("RdBu")  # blue: raises the score; red: lowers it


def _named_axis(labels: list[str], **extra) -> dict:
    """A numeric axis over 0..S−1 named by `labels` (ticks and hover), every label shown."""
    return dict(
        tickmode="linear",
        tick0=0,
        dtick=1,
        labelalias={str(i): html.escape(label, quote=False) for i, label in enumerate(labels)},
        showgrid=False,
        zeroline=False,
        **extra,
    )


def _bound(values: np.ndarray) -> float:
    return float(max(np.abs(values).max(initial=0.0), 1e-6))


@builds_figure
def score_split_figure(
    table: np.ndarray,
    query_labels: list[str],
    key_labels: list[str],
    query_heads: np.ndarray,
    key_heads: np.ndarray,
    score: float,
    where: dict,
) -> Plot:
    """The table of one score's parts (query-side sources down, key-side across), its key-side sums as
    bars above and its query-side sums as bars beside it. `where`: layer, head, query and key (each a
    position and its token). A click on a cell opens its key-side head (else its query-side one).
    # table [Q, K], *_heads [Q or K, 2] int (−1: not a head)"""
    n_q = table.shape[0]
    bound = _bound(table)
    cell_heads = np.where(key_heads[None, :, :] >= 0, key_heads[None, :, :], query_heads[:, None, :])
    names = np.array([[f"{q} × {k}" for k in key_labels] for q in query_labels], dtype=object)
    data = [
        dict(
            type="heatmap",
            z=table.astype(np.float32),
            zmid=0.0,
            zmin=-bound,
            zmax=bound,
            colorscale=DIVERGING,
            customdata=cell_heads.astype(np.int16),
            text=names,
            hovertemplate="%{text}<br>part of the score: %{z:+.4f}<extra></extra>",
            colorbar=dict(title=dict(text="part", side="right"), thickness=12, x=1.0, len=0.62, y=0.31),
            xaxis="x",
            yaxis="y",
            xgap=1,
            ygap=1,
        ),
        _marginal(table.sum(0), key_labels, key_heads, "key", "#0891b2", ("x2", "y2")),
        _marginal(table.sum(1), query_labels, query_heads, "query", "#7c3aed", ("x3", "y3")),
    ]
    query, key = where["query"], where["key"]
    title = (
        f"Why layer {where['layer']} · head {where['head']} scores {quoted_token(key[1])} (key {key[0]}) "
        f"from {quoted_token(query[1])} (query {query[0]}): scaled score {score:+.4f}, parts sum to "
        f"{float(table.sum()):+.4f}"
    )
    heat_x, heat_y = [0.0, 0.74], [0.0, 0.62]
    return figure(
        data,
        title=title,
        showlegend=False,
        height=max(480, 260 + 26 * n_q),
        margin=dict(l=130, r=70, t=70, b=120),
        xaxis=_named_axis(key_labels, domain=heat_x, tickangle=-40, title=dict(text="key-side source")),
        yaxis=_named_axis(
            query_labels, domain=heat_y, autorange="reversed", title=dict(text="query-side source")
        ),
        xaxis2=dict(domain=heat_x, matches="x", showticklabels=False, anchor="y2"),
        yaxis2=dict(domain=[0.68, 1.0], anchor="x2", zeroline=True, title=dict(text="key side")),
        xaxis3=dict(domain=[0.8, 0.95], anchor="y3", zeroline=True, title=dict(text="query side")),
        yaxis3=dict(domain=heat_y, matches="y", showticklabels=False, anchor="x3"),
    )


def _marginal(values: np.ndarray, labels: list[str], heads: np.ndarray, side: str, colour: str, axes):
    """One side's sources' parts (each summed over the other side) as bars: upright above the table for
    the key side, lying beside it for the query side."""
    at, other = np.arange(len(values), dtype=np.int32), "query" if side == "key" else "key"
    upright = side == "key"
    return dict(
        type="bar",
        orientation="v" if upright else "h",
        x=at if upright else values.astype(np.float32),
        y=values.astype(np.float32) if upright else at,
        customdata=heads.astype(np.int16),
        marker=dict(color=colour),
        hovertext=[html.escape(label, quote=False) for label in labels],
        hovertemplate=f"{side} side: %{{hovertext}}<br>its part (every {other} side): "
        f"%{{{'y' if upright else 'x'}:+.4f}}<extra></extra>",
        xaxis=axes[0],
        yaxis=axes[1],
    )


@builds_figure
def key_drivers_figure(
    parts: np.ndarray,
    labels: list[str],
    heads: np.ndarray,
    scores: np.ndarray,
    tokens: list[str],
    where: dict,
) -> Plot:
    """Each key-side source's part of one query's score at every key (sources down, keys across), the
    score itself as bars above. A click on a head's row opens that head.
    # parts [S, N], heads [S, 2] int (−1: not a head), scores [N]"""
    n_sources, n_keys = parts.shape
    bound = _bound(parts)
    row_heads = np.ascontiguousarray(
        np.broadcast_to(heads.astype(np.int16)[:, None, :], (n_sources, n_keys, 2))
    )
    keys = token_axis(tokens)
    data = [
        dict(
            type="heatmap",
            z=parts.astype(np.float32),
            zmid=0.0,
            zmin=-bound,
            zmax=bound,
            colorscale=DIVERGING,
            customdata=row_heads,
            hovertemplate="%{y}<br>key %{x:d} · %{x}<br>its part: %{z:+.4f}<extra></extra>",
            colorbar=dict(title=dict(text="part", side="right"), thickness=12, len=0.7, y=0.35),
            xaxis="x",
            yaxis="y",
        ),
        dict(
            type="bar",
            x=np.arange(n_keys, dtype=np.int32),
            y=scores.astype(np.float32),
            marker=dict(color="#0891b2"),
            hovertemplate="key %{x:d} · %{x}<br>scaled score: %{y:+.4f}<extra></extra>",
            xaxis="x2",
            yaxis="y2",
        ),
    ]
    query = where["query"]
    title = (
        f"What drives this row: layer {where['layer']} · head {where['head']}, query {query[0]} "
        f"{quoted_token(query[1])}: each key-side source's part of the score at every key"
    )
    return figure(
        data,
        title=title,
        showlegend=False,
        height=max(380, 220 + 24 * n_sources),
        margin=dict(l=130, r=70, t=70, b=80),
        xaxis=dict(keys, domain=[0.0, 0.95], title=dict(text="key")),
        yaxis=_named_axis(labels, domain=[0.0, 0.7], autorange="reversed"),
        xaxis2=dict(domain=[0.0, 0.95], matches="x", showticklabels=False, anchor="y2"),
        yaxis2=dict(domain=[0.76, 1.0], anchor="x2", zeroline=True, title=dict(text="score")),
    )


@builds_figure
def composition_figure(
    scores: dict[str, np.ndarray], n_layers: int, n_heads: int, picked: tuple[int, int] | None = None
) -> Plot:
    """K-, Q- and V-composition of every earlier head (rows) into every later head (columns), heads in
    layer order; the picked head's row and column framed. A click opens the later head.
    # scores: {"k", "q", "v"}: [L·H, L·H]"""
    n = n_layers * n_heads
    names = {str(i): f"{i // n_heads}.{i % n_heads}" for i in range(n)}
    step = max(1, n_layers // 10)
    ticks = dict(
        tickmode="array",
        tickvals=[layer * n_heads for layer in range(0, n_layers, step)],
        ticktext=[f"L{layer}" for layer in range(0, n_layers, step)],
        showgrid=False,
        zeroline=False,
    )
    kinds = [("k", "K-composition"), ("q", "Q-composition"), ("v", "V-composition")]
    width, gap = 0.3, 0.05
    data, layout, shapes = [], {}, []
    top = float(max(max(scores[kind].max(initial=0.0) for kind, _ in kinds), 1e-6))
    for i, (kind, name) in enumerate(kinds):
        n_axis = "" if i == 0 else str(i + 1)
        x0 = i * (width + gap)
        layout[f"xaxis{n_axis}"] = dict(
            ticks, domain=[x0, x0 + width], title=dict(text=f"{name}: later head"), anchor=f"y{n_axis}"
        )
        layout[f"yaxis{n_axis}"] = dict(
            ticks,
            autorange="reversed",
            anchor=f"x{n_axis}",
            **({"matches": "y", "showticklabels": False} if i else {"title": dict(text="earlier head")}),
        )
        data.append(
            dict(
                type="heatmap",
                z=scores[kind].astype(np.float32),
                zmin=0.0,
                zmax=top,
                colorscale=get_colorscale("Viridis"),
                showscale=i == 2,
                colorbar=dict(title=dict(text="score", side="right"), thickness=12),
                hovertemplate=f"{name}<br>earlier head %{{y}} → later head %{{x}}: %{{z:.3f}}<extra></extra>",
                xaxis=f"x{n_axis}",
                yaxis=f"y{n_axis}",
            )
        )
        for layer_axis in (f"xaxis{n_axis}", f"yaxis{n_axis}"):
            layout[layer_axis]["labelalias"] = names
        if picked is not None:
            at = picked[0] * n_heads + picked[1]
            line = dict(color="#dc2626", width=1.5)
            for x_range, y_range in (
                ((-0.5, n - 0.5), (at - 0.5, at + 0.5)),
                ((at - 0.5, at + 0.5), (-0.5, n - 0.5)),
            ):
                shapes.append(
                    dict(
                        type="rect",
                        xref=f"x{n_axis}",
                        yref=f"y{n_axis}",
                        x0=x_range[0],
                        x1=x_range[1],
                        y0=y_range[0],
                        y1=y_range[1],
                        line=line,
                        fillcolor="rgba(0,0,0,0)",
                    )
                )
    picked_text = ""
    if picked is not None:
        picked_text = (
            f"<br><sup>head {picked[0]}.{picked[1]} framed: its row, the later heads that read it; "
            "its column, the earlier heads it reads</sup>"
        )
    return figure(
        data,
        title="How much each head reads what an earlier head writes, from the weights alone (Elhage et "
        f"al. 2021){picked_text}",
        shapes=shapes,
        height=460,
        margin=dict(l=80, r=70, t=70, b=70),
        meta={"composition_heads": n_heads},
        **layout,
    )

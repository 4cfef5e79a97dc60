"""What moved where: the information-flow graph as tokens × layers, and attention rollout beside it.

The graph's x axis holds only the tokens a route reaches, in order, each labelled with its position, so a
long prompt's graph stays readable. Each layer spans one unit of height: the stream entering it at the
bottom, the stream after attention half-way up, the block's output at the top (the next layer's input);
the MLP sits to the right of its token. Edges are drawn a few traces per kind, their width and opacity
binned by weight; a marker at each edge's middle carries its hover (an attention edge's heads) and, for
attention, the (layer, head) a click opens.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from explorer.figures.common import figure, hover_label, quoted_token, token_axis

KIND_COLOURS = {
    "attention": "#2563eb",
    "residual": "#9ca3af",
    "mlp": "#7c3aed",
    "mlp_residual": "#9ca3af",
}
KIND_NAMES = {
    "attention": "attention",
    "residual": "residual (through attention)",
    "mlp": "MLP",
    "mlp_residual": "residual (past the MLP)",
}
WEIGHT_BINS = 8  # widths and opacities drawn per kind
SLOT_PX = 64  # a reached token's width
MLP_DX, SELF_DX = 0.28, -0.12  # the MLP node's offset right of its token; a token's attention to itself


def _segments(edge: tuple, slot: dict[int, int]) -> tuple[list[float], list[float]]:
    """An edge's polyline (x, y) in the graph's coordinates."""
    layer, source, target, _, kind, _ = edge
    x0, x1 = slot[source], slot[target]
    if kind == "attention":
        dx = SELF_DX if source == target else 0.0
        return [x0 + dx, x1 + dx], [layer, layer + 0.5]
    if kind == "residual":
        return [x0, x1], [layer, layer + 0.5]
    if kind == "mlp":
        return [x0, x0 + MLP_DX, x0], [layer + 0.5, layer + 0.75, layer + 1]
    return [x0, x0], [layer + 0.5, layer + 1]  # mlp_residual


def flow_figure(
    tokens: list[str], edges: list[tuple], n_layers: int, position: int, threshold: float
) -> tuple[go.Figure, list[int]]:
    """The graph of `edges` (layer, from, to, weight, kind, heads) reaching `position`'s output; and the
    positions it reaches, in order."""
    reached = sorted({e[1] for e in edges} | {e[2] for e in edges} | {position})
    slot = {p: i for i, p in enumerate(reached)}
    data = []
    for kind, colour in KIND_COLOURS.items():
        ofkind = [e for e in edges if e[4] == kind]
        bins = np.minimum((np.array([e[3] for e in ofkind]) * WEIGHT_BINS).astype(int), WEIGHT_BINS - 1)
        for b in sorted(set(bins.tolist())):
            xs, ys = [], []
            for e in (e for e, eb in zip(ofkind, bins, strict=True) if eb == b):
                x, y = _segments(e, slot)
                xs += [*x, None]
                ys += [*y, None]
            weight = (b + 0.5) / WEIGHT_BINS
            data.append(
                dict(
                    type="scatter",
                    mode="lines",
                    x=xs,
                    y=ys,
                    line=dict(color=colour, width=0.8 + 7 * weight),
                    opacity=0.3 + 0.7 * weight,
                    hoverinfo="skip",
                    name=KIND_NAMES[kind],
                    legendgroup=kind,
                    showlegend=False,
                )
            )
    data.append(_midpoints(tokens, edges, slot))
    data += [_legend_entry(kind, colour) for kind, colour in KIND_COLOURS.items() if kind != "mlp_residual"]
    axis = token_axis([tokens[p] for p in reached])
    axis["labelalias"] = {str(i): f"{hover_label(tokens[p])}<br>{p}" for i, p in enumerate(reached)}
    axis.update(dtick=1, range=[-0.6, len(reached) - 0.4], title=dict(text="token (position)"))
    step = 1 if n_layers <= 16 else 2
    layers = list(range(0, n_layers, step))
    yaxis = dict(
        tickmode="array",
        tickvals=[0, *(layer + 0.5 for layer in layers), n_layers],
        ticktext=["emb", *(str(layer) for layer in layers), "out"],
        range=[-0.2, n_layers + 0.2],
        title=dict(text="layer"),
        showgrid=False,
        zeroline=False,
    )
    title = (
        f"What reaches the output at {quoted_token(tokens[position])} (position {position}): every route "
        f"of weight ≥ {threshold:g}"
    )
    fig = figure(
        data,
        title=title,
        xaxis=axis,
        yaxis=yaxis,
        height=max(360, 140 + 26 * n_layers),
        meta=dict(min_width=160 + SLOT_PX * len(reached)),
        legend=dict(orientation="h", y=1.02, x=1, xanchor="right", yanchor="bottom"),
        margin=dict(l=70, t=90, b=80),
        hovermode="closest",
    )
    return fig, reached


def _midpoints(tokens: list[str], edges: list[tuple], slot: dict[int, int]) -> dict:
    """A marker at each edge's middle: its hover, and for attention the (layer, head) a click opens."""
    xs, ys, hover, picks = [], [], [], []
    for e in edges:
        layer, source, target, weight, kind, heads = e
        x, y = _segments(e, slot)
        xs.append(float(np.mean(x)) if kind != "mlp" else x[1])
        ys.append(float(np.mean(y)) if kind != "mlp" else y[1])
        where = f"layer {layer}: {quoted_token(tokens[source])} ({source})"
        if source != target:
            where += f" → {quoted_token(tokens[target])} ({target})"
        text = f"{where}<br>{KIND_NAMES[kind]}: {weight:.3g}"
        if heads:
            text += "<br>" + "<br>".join(f"head {h}: {w:.3g}" for h, w in heads[:8])
            text += f"<br>(+{len(heads) - 8} more)" if len(heads) > 8 else ""
        hover.append(text)
        picks.append([layer, heads[0][0] if heads else -1])
    return dict(
        type="scatter",
        mode="markers",
        x=np.asarray(xs, dtype=np.float32),
        y=np.asarray(ys, dtype=np.float32),
        marker=dict(  # residual edges' markers hover unseen: a column of dots would hide the routes
            size=7,
            color=[KIND_COLOURS[e[4]] for e in edges],
            opacity=[0.0 if e[4].endswith("residual") else 0.7 for e in edges],
            line=dict(width=1, color="white"),
        ),
        customdata=picks,
        text=hover,
        hovertemplate="%{text}<extra></extra>",
        showlegend=False,
    )


def _legend_entry(kind: str, colour: str) -> dict:
    name = "residual" if kind == "residual" else KIND_NAMES[kind]
    return dict(type="scatter", mode="lines", x=[None], y=[None], line=dict(color=colour, width=4), name=name)


def rollout_figure(tokens: list[str], row: np.ndarray, position: int, reached: list[int]) -> go.Figure:
    """Attention rollout's row at `position` over the tokens up to it, the graph's tokens in a darker
    colour.  # row [N]"""
    n = position + 1
    on_route = np.isin(np.arange(n), reached)
    colours = np.where(on_route, "#1d4ed8", "#93c5fd").tolist()
    data = [
        dict(
            type="bar",
            x=np.arange(n, dtype=np.int32),
            y=row[:n].astype(np.float32),
            marker=dict(color=colours),
            hovertemplate="%{x:d} %{x}: %{y:.3g}<extra></extra>",
        )
    ]
    axis = token_axis(tokens[:n])
    return figure(
        data,
        title=f"Attention rollout from {quoted_token(tokens[position])} (position {position}): a cruder "
        "reading, for comparison",
        xaxis=dict(axis, title=dict(text="position (dark: tokens the graph reaches)")),
        yaxis=dict(type="log", title=dict(text="rollout (log scale)"), exponentformat="power"),
        height=300,
        meta=dict(min_width=min(160 + 14 * n, 4000)),
        margin=dict(b=70),
    )

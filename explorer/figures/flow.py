"""What moved where: the information-flow graph as tokens × layers, and attention rollout beside it.

The graph's x axis holds only the tokens a route reaches, in order, each labelled with its position, so a
long prompt's graph stays readable. Each layer spans one unit of height: the stream entering it at the
bottom, the stream after attention half-way up, the block's output at the top (the next layer's input).
An attention route curves from its key's column up into its query's (a token reading itself bulges to
the left); the residual runs straight up its column; the MLP hugs the column on its right, a square at
its middle. Each edge is drawn as wide and as dark as the share of the output it carries (its weight
times what its end carries on to the output, which carries 1), attention routes against the strongest
of them, so the routes that matter stand out; the three strongest are named by their head ("23.4"). A
marker on each edge carries its hover (an attention edge's heads) and, for attention, the (layer, head)
a click opens.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from explorer.figures.common import figure, hover_label, quoted_token, token_axis
from explorer.figures.plot import Plot, builds_figure

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
MLP_DX = 0.14  # how far right of its column the MLP's bracket stands
SELF_DX = -0.22  # how far left a token's attention to itself bulges
CURVE_POINTS = 12  # points along an attention route's curve
NAMED_ROUTES = 3  # attention routes named by their head


def carried(edges: list[tuple], position: int, n_layers: int) -> tuple[list[float], dict[int, float]]:
    """The share of the output at `position` each edge carries (its weight times what its end carries,
    the output carrying 1), and each token's share at the embeddings: the graph's own answer to
    "which tokens does the output come from", beside rollout's.  # edges (layer, from, to, weight, kind, …)"""
    above = {position: 1.0}  # what each token's stream carries on to the output, above this layer
    share = [0.0] * len(edges)
    by_layer = defaultdict(list)
    for i, edge in enumerate(edges):
        by_layer[edge[0]].append(i)
    for layer in reversed(range(n_layers)):
        middle, below = defaultdict(float), defaultdict(float)  # after attention; entering the block
        for steps, into, out_of in (
            (("mlp", "mlp_residual"), above, middle),
            (("attention", "residual"), middle, below),
        ):
            for i in by_layer[layer]:
                _, source, target, weight, kind, _ = edges[i]
                if kind in steps:
                    share[i] = weight * into.get(target, 0.0)
                    out_of[source] += share[i]
        above = below
    return share, dict(above)


def relative(edges: list[tuple], share: list[float]) -> list[float]:
    """Each edge's share over the largest of its family's: attention routes among themselves (the
    strongest drawn boldest, though a residual near the output carries more), the residual and the
    MLP among all edges.  # -> [E] in [0, 1]"""
    attention = max((s for s, e in zip(share, edges, strict=True) if e[4] == "attention"), default=0.0)
    every = max(share, default=0.0)
    return [
        s / ((attention if e[4] == "attention" else every) or 1.0) for s, e in zip(share, edges, strict=True)
    ]


def _path(edge: tuple, slot: dict[int, int]) -> tuple[list[float], list[float]]:
    """An edge's line (x, y) in the graph's coordinates."""
    layer, source, target, _, kind, _ = edge
    x0, x1 = slot[source], slot[target]
    if kind == "attention":
        t = np.linspace(0.0, 1.0, CURVE_POINTS)
        if source == target:  # a bulge to the left, from the column and back into it
            xs = x0 + SELF_DX * 4 * t * (1 - t)
        else:  # leaves its key going up, arrives at its query from below: a cubic Bézier
            xs = (1 - t) ** 3 * x0 + 3 * (1 - t) ** 2 * t * x0 + 3 * (1 - t) * t**2 * x1 + t**3 * x1
        return xs.tolist(), (layer + 0.5 * t).tolist()
    if kind == "mlp":  # a bracket on the column's right
        return [x0, x0 + MLP_DX, x0 + MLP_DX, x0], [layer + 0.55, layer + 0.62, layer + 0.88, layer + 0.95]
    if kind == "residual":
        return [x0, x1], [layer, layer + 0.5]
    return [x0, x0], [layer + 0.5, layer + 1]  # mlp_residual


def _middle(edge: tuple, slot: dict[int, int]) -> tuple[float, float]:
    """Where an edge's marker sits: on its line, half-way along."""
    xs, ys = _path(edge, slot)
    if edge[4] == "mlp":
        return xs[1], edge[0] + 0.75
    k = len(xs) // 2
    return (xs[k], ys[k]) if len(xs) > 2 else (float(np.mean(xs)), float(np.mean(ys)))


def flow_figure(
    tokens: list[str], edges: list[tuple], n_layers: int, position: int, threshold: float
) -> tuple[Plot, dict[int, float]]:
    """The graph of `edges` (layer, from, to, weight, kind, heads) reaching `position`'s output; and
    each token's share of it at the embeddings (`carried`)."""
    reached = sorted({e[1] for e in edges} | {e[2] for e in edges} | {position})
    slot = {p: i for i, p in enumerate(reached)}
    share, by_token = carried(edges, position, n_layers)
    strength = relative(edges, share)
    data = []
    for kind, colour in KIND_COLOURS.items():
        ofkind = [i for i, e in enumerate(edges) if e[4] == kind]
        bins = {i: min(int(np.sqrt(strength[i]) * WEIGHT_BINS), WEIGHT_BINS - 1) for i in ofkind}
        for b in sorted(set(bins.values())):
            xs, ys = [], []
            for i in (i for i in ofkind if bins[i] == b):
                x, y = _path(edges[i], slot)
                xs += [*x, None]
                ys += [*y, None]
            level = (b + 0.5) / WEIGHT_BINS
            widest = 9 if kind == "attention" else 6  # the routes between tokens stand out
            data.append(
                dict(
                    type="scatter",
                    mode="lines",
                    x=xs,
                    y=ys,
                    line=dict(color=colour, width=1 + widest * level),
                    opacity=0.2 + 0.8 * level,
                    hoverinfo="skip",
                    showlegend=False,
                )
            )
    data.append(_markers(tokens, edges, slot, share, strength))
    data.append(_output(position, slot, n_layers))
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
        range=[-0.2, n_layers + 0.3],
        title=dict(text="layer"),
        showgrid=False,
        zeroline=False,
    )
    title = (
        f"What reaches the output at {quoted_token(tokens[position])} (position {position}): every route "
        f"of weight ≥ {threshold:g}, drawn as wide as the share of the output it carries"
    )
    fig = figure(
        data,
        title=title,
        xaxis=axis,
        yaxis=yaxis,
        annotations=_named_routes(edges, slot, share),
        height=max(380, 160 + 26 * n_layers),
        meta=dict(min_width=160 + SLOT_PX * len(reached)),
        legend=dict(orientation="h", x=0, xanchor="left", y=1.0, yanchor="bottom"),  # under the title
        margin=dict(l=70, t=96, b=80),
        hovermode="closest",
    )
    return fig, by_token


def _markers(tokens, edges, slot, share, strength) -> dict:
    """A marker on each edge: its hover, and for attention the (layer, head) a click opens. Residual
    edges' markers hover unseen (a column of dots would hide the routes); the others are as dark as
    their edge."""
    xs, ys, hover, picks, opacity = [], [], [], [], []
    for e, carries, level in zip(edges, share, strength, strict=True):
        layer, source, target, weight, kind, heads = e
        x, y = _middle(e, slot)
        xs.append(x)
        ys.append(y)
        where = f"layer {layer}: {quoted_token(tokens[source])} ({source})"
        if source != target:
            where += f" → {quoted_token(tokens[target])} ({target})"
        text = f"{where}<br>{KIND_NAMES[kind]}: weight {weight:.3g}, carries {carries:.3g} of the output"
        if heads:
            text += "<br>" + "<br>".join(f"head {h}: {w:.3g}" for h, w in heads[:8])
            text += f"<br>(+{len(heads) - 8} more)" if len(heads) > 8 else ""
        hover.append(text)
        picks.append([layer, heads[0][0] if heads else -1])
        opacity.append(0.0 if kind.endswith("residual") else 0.35 + 0.65 * np.sqrt(level))
    return dict(
        type="scatter",
        mode="markers",
        x=np.asarray(xs, dtype=np.float32),
        y=np.asarray(ys, dtype=np.float32),
        marker=dict(
            size=[5 if e[4] == "attention" else 7 for e in edges],
            symbol=["square" if e[4] == "mlp" else "circle" for e in edges],
            color=[KIND_COLOURS[e[4]] for e in edges],
            opacity=opacity,
            line=dict(width=1, color="white"),
        ),
        customdata=picks,
        text=hover,
        hovertemplate="%{text}<extra></extra>",
        showlegend=False,
    )


def _output(position: int, slot: dict[int, int], n_layers: int) -> dict:
    """The output the routes reach: a ring at the top of its token's column."""
    return dict(
        type="scatter",
        mode="markers",
        x=[slot[position]],
        y=[n_layers],
        marker=dict(size=14, color="white", line=dict(width=3, color="#111827")),
        hoverinfo="skip",
        showlegend=False,
    )


def _named_routes(edges, slot, share) -> list[dict]:
    """The strongest attention routes between two tokens, named by their layer and top head."""
    routes = [i for i, e in enumerate(edges) if e[4] == "attention" and e[1] != e[2] and e[5]]
    routes = sorted(routes, key=lambda i: -share[i])[:NAMED_ROUTES]
    named = []
    for i in routes:
        layer, *_, heads = edges[i]
        x, y = _middle(edges[i], slot)
        named.append(
            dict(
                text=f"<b>{layer}.{heads[0][0]}</b>",
                x=x,
                y=y,
                xref="x",
                yref="y",
                showarrow=False,
                yshift=11,
                font=dict(size=11, color="#1e3a8a"),
                bgcolor="rgba(255,255,255,0.8)",
            )
        )
    return named


def _legend_entry(kind: str, colour: str) -> dict:
    name = "residual" if kind == "residual" else KIND_NAMES[kind]
    return dict(type="scatter", mode="lines", x=[None], y=[None], line=dict(color=colour, width=4), name=name)


@builds_figure
def rollout_figure(tokens: list[str], row: np.ndarray, position: int, by_token: dict[int, float]) -> Plot:
    """Attention rollout's row at `position` over the tokens up to it, beside the graph's own share of
    the output from each token (`carried`).  # row [N]"""
    n = position + 1
    positions = np.arange(n, dtype=np.int32)
    graph = np.array([by_token.get(i, 0.0) for i in range(n)], dtype=np.float32)
    bars = (
        ("attention rollout", row[:n].astype(np.float32), "#93c5fd"),
        ("the graph's routes", np.where(graph > 0, graph, np.nan).astype(np.float32), "#1d4ed8"),
    )
    data = [
        dict(
            type="bar",
            name=name,
            x=positions,
            y=values,
            marker=dict(color=colour),
            hovertemplate=f"%{{x:d}} %{{x}}<br>{name}: %{{y:.3g}}<extra></extra>",
        )
        for name, values, colour in bars
    ]
    axis = token_axis(tokens[:n])
    return figure(
        data,
        title=f"Which tokens the output at {quoted_token(tokens[position])} (position {position}) comes "
        "from: attention rollout, a cruder reading, beside the graph's routes",
        barmode="group",
        legend=dict(orientation="h", x=0, xanchor="left", y=1.0, yanchor="bottom"),
        xaxis=dict(axis, title=dict(text="position")),
        # a label a decade: between them Plotly would label 2 and 5 too, crowding a 320 px figure
        yaxis=dict(type="log", dtick=1, title=dict(text="share (log scale)"), exponentformat="power"),
        height=320,
        meta=dict(min_width=min(160 + 18 * n, 4000)),
        margin=dict(b=70, t=84),
    )

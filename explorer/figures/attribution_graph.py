"""A position-resolved attribution graph (`explorer.engine.graph`) drawn over the prompt: x the token
positions, y the layers (the embedding below, the logits on top). Plain values in (what
`explorer.views.attribution_graph` lays out), Plotly out.

Every node is a labelled marker (`23.3`, `MLP 12`, `emb “Mary”`, `logits`, a kv head's input `k 18.2`),
sized by its influence; an edge is a line from its writer to what reads it, coloured by the input it
feeds (q, k, v, MLP, logits), dashed where its score is negative, thicker for the strongest. A head at
query position i reads its keys and values at j through an attention edge from its k/v node at j, as
wide as the clean run's attention weight; a click on the midpoint of an attention edge names (layer,
head, query, key), a click on a head its layer and head.

`layout.meta.paths` names the node trace and every edge as a pair of nodes (writer first, the
attention edges' k/v input before its head), with the nodes' places and the colour of lit paths: the
page lights every path through a node hovered, and a click pins it
(components/plot_view/frontend/paths.mjs).
"""

from __future__ import annotations

from explorer.figures.circuits import INPUT_COLOURS
from explorer.figures.common import figure, token_label
from explorer.figures.plot import Plot, builds_figure

NODE_COLOURS = {
    "embedding": "#6b7280",
    "head": "#111827",
    "mlp": "#8c564b",
    "logits": "#d62728",
    "kv": "#059669",
}
WIDTHS = (1.0, 2.5, 5.0)  # edges by |score|: under a third of the strongest, under two thirds, the rest
ATTENTION_COLOUR = "rgba(5, 150, 105, 0.55)"
LIT_COLOUR = "rgba(234, 88, 12, 0.9)"  # the paths through the node hovered or pinned
LAYER_PX = 36  # between two layers: a label over the largest marker clears the next layer's markers
MARGIN = dict(l=70, r=20, t=60, b=100)


@builds_figure
def attribution_graph_figure(
    tokens: list[str],
    centres: list[float],
    width: float,
    n_layers: int,
    nodes: list[dict],
    edges: list[dict],
    attention: list[dict],
    title: str,
) -> Plot:
    """centres: [N] the x of each position's column, ending at `width` (px at the figure's least width:
    it scrolls sideways in a narrower card); nodes: {x, y, label, kind,
    influence, hover, layer, head} (kind: embedding, head, mlp, logits, kv; layer and head −1 where not
    a head); edges: {x0, y0, x1, y1, source, target, reader, score, hover} (source and target: indices
    into `nodes`; reader: q, k, v, mlp, logits); attention: {x0, y0, x1, y1, source, target, weight,
    layer, head, query, key, hover}."""
    places = [(node["x"], node["y"]) for node in nodes]
    data = _edge_traces(edges, places) + _attention_traces(attention, places) + [_node_trace(nodes)]
    paths = dict(
        nodes=len(data) - 1,
        colour=LIT_COLOUR,
        edges=[[edge["source"], edge["target"]] for edge in edges + attention],
        x=[node["x"] for node in nodes],
        y=[node["y"] for node in nodes],
    )
    y_ticks = list(range(-1, n_layers + 1))
    y_labels = ["embedding", *(str(layer) for layer in range(n_layers)), "logits"]
    x_axis = dict(
        title=dict(text="token position"),
        tickmode="array",
        tickvals=list(centres),
        ticktext=[token_label(token) for token in tokens],
        range=[0, width],
        fixedrange=True,  # no zoom: a click after a click on a node is not a double click's autorange
        showgrid=True,
        gridcolor="#f3f4f6",
        zeroline=False,
    )
    return figure(
        data,
        title=title,
        xaxis=x_axis,
        yaxis=dict(
            title=dict(text="layer"),
            tickmode="array",
            tickvals=y_ticks,
            ticktext=y_labels,
            range=[-1.6, n_layers + 0.9],
            fixedrange=True,
            showgrid=True,
            gridcolor="#f3f4f6",
            zeroline=False,
        ),
        legend=dict(orientation="h", x=0, y=0.005, xanchor="left", yanchor="bottom", yref="container"),
        hovermode="closest",
        meta=dict(paths=paths, min_width=round(width) + MARGIN["l"] + MARGIN["r"]),
        height=max(420, 160 + LAYER_PX * (n_layers + 2)),
        margin=MARGIN,
    )


def _edge_traces(edges: list[dict], places: list[tuple[float, float]]) -> list[dict]:
    """One line trace per (reader kind, sign, width): a trace has one colour, dash and width."""
    strongest = max((abs(edge["score"]) for edge in edges), default=0.0) or 1.0
    groups: dict[tuple, list[dict]] = {}
    for edge in edges:
        width = WIDTHS[min(2, int(3 * abs(edge["score"]) / strongest))]
        groups.setdefault((edge["reader"], edge["score"] < 0, width), []).append(edge)
    traces, named = [], set()
    # thin first, under the thick; a reader's legend entry its first positive (solid) trace
    for (reader, negative, width), members in sorted(
        groups.items(), key=lambda item: (item[0][2], item[0][1])
    ):
        traces.append(
            _lines(
                members,
                name=f"into {'MLP' if reader == 'mlp' else reader}",
                legendgroup=reader,
                showlegend=reader not in named and not negative,
                line=dict(
                    color=INPUT_COLOURS.get(reader, "#7f7f7f"), width=width, dash="dot" if negative else None
                ),
                opacity=0.75,
            )
        )
        if not negative:
            named.add(reader)
    if edges:  # the edges' hover, at a point of each clear of the nodes
        traces.append(_midpoints(edges, places, marker=dict(size=6, color="rgba(0,0,0,0)"), name="edges"))
    return traces


def _attention_traces(attention: list[dict], places: list[tuple[float, float]]) -> list[dict]:
    """Attention edges, as wide as their weight (bands of a quarter), and a clickable midpoint each."""
    if not attention:
        return []
    traces, bands = [], {}
    for edge in attention:
        bands.setdefault(min(3, int(4 * edge["weight"])), []).append(edge)
    for band, members in sorted(bands.items()):
        traces.append(
            _lines(
                members,
                name="attention (clean run)",
                legendgroup="attention",
                showlegend=band == min(bands),
                line=dict(color=ATTENTION_COLOUR, width=1.5 + 2.5 * band),
            )
        )
    traces.append(
        _midpoints(
            attention,
            places,
            customdata=[[edge["layer"], edge["head"], edge["query"], edge["key"]] for edge in attention],
            marker=dict(size=9, color=ATTENTION_COLOUR, symbol="diamond"),
            name="attention edges",
            meta=dict(role="attention"),
        )
    )
    return traces


def _lines(edges: list[dict], **style) -> dict:
    """The edges as one line trace: each from (x0, y0) to (x1, y1), None between; no hover of its own."""
    xs, ys = [], []
    for edge in edges:
        xs += [edge["x0"], edge["x1"], None]
        ys += [edge["y0"], edge["y1"], None]
    return dict(type="scatter", mode="lines", x=xs, y=ys, hoverinfo="skip", **style)


def _midpoints(edges: list[dict], places: list[tuple[float, float]], **style) -> dict:
    """A marker on each edge carrying its hover text (and what else `style` gives it): at its middle,
    or nearer an end where a node or an earlier edge's marker sits there (Plotly's hover takes the
    smaller marker, or either of two on one spot: one would hide the other's hover and click)."""
    nodes, markers, points = _Near(NODE_CLEAR, places), _Near(MARKER_CLEAR), []
    for edge in edges:
        points.append(_clear_point(edge, nodes, markers))
        markers.add(points[-1])
    return dict(
        type="scatter",
        mode="markers",
        x=[x for x, _ in points],
        y=[y for _, y in points],
        text=[edge["hover"] for edge in edges],
        hovertemplate="%{text}<extra></extra>",
        showlegend=False,
        **style,
    )


NODE_CLEAR = (16.0, 0.45)  # how far (x px, y layers) a marker on an edge stays from a node's centre
MARKER_CLEAR = (14.0, 0.4)  # and from another edge's marker
ALONG = sorted((t / 20 for t in range(2, 19)), key=lambda t: abs(t - 0.5))  # its places, middle first


class _Near:
    """Points in cells of one `room` (x, y): how near a point is to the nearest, in rooms (under 1:
    within a room both ways), looking in the neighbouring cells only."""

    def __init__(self, room: tuple[float, float], points=()):
        self.room, self.cells = room, {}
        for point in points:
            self.add(point)

    def cell(self, point) -> tuple[int, int]:
        return int(point[0] // self.room[0]), int(point[1] // self.room[1])

    def add(self, point) -> None:
        self.cells.setdefault(self.cell(point), []).append(point)

    def gap(self, point) -> float:
        """The distance to the nearest point in rooms, capped at 1 (clear)."""
        (cx, cy), (rx, ry), nearest = self.cell(point), self.room, 1.0
        for dx in (-1, 0, 1):
            for dy in (-1, 0, 1):
                for x, y in self.cells.get((cx + dx, cy + dy), ()):
                    nearest = min(nearest, max(abs(point[0] - x) / rx, abs(point[1] - y) / ry))
        return nearest


def _clear_point(edge: dict, nodes: _Near, markers: _Near) -> tuple[float, float]:
    """The first point along the edge (`ALONG`) clear of every node and marker, else of every node,
    else the one farthest from the nearest node (Plotly's hover prefers the smaller marker only within
    a few pixels of its centre)."""
    (x0, y0), (x1, y1) = (edge["x0"], edge["y0"]), (edge["x1"], edge["y1"])
    along = [(x0 + t * (x1 - x0), y0 + t * (y1 - y0)) for t in ALONG]
    for point in along:
        if nodes.gap(point) >= 1 and markers.gap(point) >= 1:
            return point
    return max(along, key=nodes.gap)


def _node_trace(nodes: list[dict]) -> dict:
    strongest = max((node["influence"] for node in nodes), default=0.0) or 1.0
    return dict(
        type="scatter",
        mode="markers+text",
        x=[node["x"] for node in nodes],
        y=[node["y"] for node in nodes],
        text=[node["label"] for node in nodes],
        textposition="top center",
        textfont=dict(size=10, shadow="auto"),  # a halo of the background: readable over edges
        customdata=[[node["layer"], node["head"], node["hover"]] for node in nodes],
        hovertemplate="%{customdata[2]}<extra></extra>",
        marker=dict(
            size=[8 + 12 * (node["influence"] / strongest) ** 0.5 for node in nodes],  # 20 px at most
            color=[NODE_COLOURS[node["kind"]] for node in nodes],
            line=dict(width=1, color="white"),
        ),
        showlegend=False,
        name="nodes",
        meta=dict(role="nodes"),
    )

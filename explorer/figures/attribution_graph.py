"""A position-resolved attribution graph (`explorer.engine.graph`) drawn over the prompt: x the token
positions, y the layers (the embedding below, the logits on top). Plain values in (what
`explorer.views.attribution_graph` lays out), Plotly out.

Every node is a labelled marker (`23.3`, `MLP 12`, `emb “Mary”`, `logits`, a kv head's input `k 18.2`),
sized by its influence; an edge is a line from its writer to what reads it, coloured by the input it
feeds (q, k, v, MLP, logits), dashed where its score is negative, thicker for the strongest. A head at
query position i reads its keys and values at j through an attention edge from its k/v node at j, as
wide as the clean run's attention weight; a click on the midpoint of an attention edge names (layer,
head, query, key), a click on a head its layer and head.
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
    """centres: [N] the x of each position's column, ending at `width`; nodes: {x, y, label, kind,
    influence, hover, layer, head} (kind: embedding, head, mlp, logits, kv; layer and head −1 where not
    a head); edges: {x0, y0, x1, y1, reader, score, hover} (reader: q, k, v, mlp, logits); attention:
    {x0, y0, x1, y1, weight, layer, head, query, key, hover}."""
    data = _edge_traces(edges) + _attention_traces(attention) + [_node_trace(nodes)]
    y_ticks = list(range(-1, n_layers + 1))
    y_labels = ["embedding", *(str(layer) for layer in range(n_layers)), "logits"]
    x_axis = dict(
        title=dict(text="token position"),
        tickmode="array",
        tickvals=list(centres),
        ticktext=[token_label(token) for token in tokens],
        range=[0, width],
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
            showgrid=True,
            gridcolor="#f3f4f6",
            zeroline=False,
        ),
        legend=dict(orientation="h", x=0, y=0.005, xanchor="left", yanchor="bottom", yref="container"),
        hovermode="closest",
        height=max(420, 160 + 26 * (n_layers + 2)),
        margin=dict(l=70, r=20, t=60, b=100),
    )


def _edge_traces(edges: list[dict]) -> list[dict]:
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
    if edges:  # the edges' hover, at their midpoints
        traces.append(_midpoints(edges, marker=dict(size=6, color="rgba(0,0,0,0)"), name="edges"))
    return traces


def _attention_traces(attention: list[dict]) -> list[dict]:
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


def _midpoints(edges: list[dict], **style) -> dict:
    """A marker at each edge's midpoint carrying its hover text (and what else `style` gives it)."""
    return dict(
        type="scatter",
        mode="markers",
        x=[(edge["x0"] + edge["x1"]) / 2 for edge in edges],
        y=[(edge["y0"] + edge["y1"]) / 2 for edge in edges],
        text=[edge["hover"] for edge in edges],
        hovertemplate="%{text}<extra></extra>",
        showlegend=False,
        **style,
    )


def _node_trace(nodes: list[dict]) -> dict:
    strongest = max((node["influence"] for node in nodes), default=0.0) or 1.0
    return dict(
        type="scatter",
        mode="markers+text",
        x=[node["x"] for node in nodes],
        y=[node["y"] for node in nodes],
        text=[node["label"] for node in nodes],
        textposition="top center",
        textfont=dict(size=10),
        customdata=[[node["layer"], node["head"], node["hover"]] for node in nodes],
        hovertemplate="%{customdata[2]}<extra></extra>",
        marker=dict(
            size=[8 + 18 * (node["influence"] / strongest) ** 0.5 for node in nodes],
            color=[NODE_COLOURS[node["kind"]] for node in nodes],
            line=dict(width=1, color="white"),
        ),
        showlegend=False,
        name="nodes",
        meta=dict(role="nodes"),
    )

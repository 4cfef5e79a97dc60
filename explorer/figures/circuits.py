"""A circuit's figures: node scores as layers × heads (× positions where asked; AtP beside the exact
sweep), the circuit as a graph of its kept edges, and the faithfulness curve. Numpy and strings in,
Plotly out."""

from __future__ import annotations

import html

import numpy as np
from plotly.colors import get_colorscale

from explorer.figures.common import figure
from explorer.figures.plot import Plot, builds_figure

# How each input a head reads is drawn: the kind of the downstream node (engine.edges) to a colour
INPUT_COLOURS = {"q": "#1f77b4", "k": "#2ca02c", "v": "#9467bd", "mlp": "#8c564b", "logits": "#d62728"}
INTEGERS = dict(tickmode="linear", tick0=0, dtick=1, showgrid=False, zeroline=False)


@builds_figure
def node_scores_figure(panels: dict[str, np.ndarray], what: str) -> Plot:
    """Each head's recovered fraction, one heatmap per method side by side on one diverging scale
    centred at 0.  # panels: method name -> recovered [L, H]"""

    def x_axis(name: str, domain: list[float]) -> dict:
        return dict(title=dict(text=f"head ({name})"), domain=domain, **INTEGERS)

    def hover(name: str) -> str:
        return f"{name}<br>layer %{{y}} · head %{{x}}<br>recovered %{{z:.3g}}<extra></extra>"

    data, layout = _score_panels(panels, x_axis, hover)
    n_layers = next(iter(panels.values())).shape[0] if panels else 1
    return figure(
        data,
        title=f"Each head's output patched from the clean run into the corrupted one: recovered {what}",
        height=max(340, 160 + 22 * n_layers),
        **layout,
    )


@builds_figure
def node_position_scores_figure(
    panels: dict[str, np.ndarray], what: str, positions: tuple[int, ...], tokens: tuple[str, ...]
) -> Plot:
    """Each head's recovered fraction at each position, one heatmap per method side by side on one
    diverging scale centred at 0: a column per (head, position), a head's positions side by side.
    # panels: method name -> recovered [L, H, P]; positions [P] from the end, tokens [P] there"""
    n_layers, n_heads, n_positions = next(iter(panels.values())).shape
    where = [f"{pos} ‘{html.escape(token)}’" for pos, token in zip(positions, tokens, strict=True)]
    cells = [
        [[layer, h, where[p]] for h in range(n_heads) for p in range(n_positions)]
        for layer in range(n_layers)
    ]
    centres = [h * n_positions + (n_positions - 1) / 2 for h in range(n_heads)]

    def x_axis(name: str, domain: list[float]) -> dict:
        return dict(
            title=dict(text=f"head, its last {n_positions} positions ({name})"),
            domain=domain,
            tickmode="array",
            tickvals=centres,
            ticktext=[str(h) for h in range(n_heads)],
            showgrid=False,
            zeroline=False,
        )

    def hover(name: str) -> str:
        return (
            f"{name}<br>layer %{{customdata[0]}} · head %{{customdata[1]}}<br>position "
            "%{customdata[2]}<br>recovered %{z:.3g}<extra></extra>"
        )

    columns = {name: p.reshape(n_layers, n_heads * n_positions) for name, p in panels.items()}
    data, layout = _score_panels(columns, x_axis, hover, cells)
    shapes = [  # a thin line between heads
        dict(
            type="line",
            xref=f"x{'' if i == 0 else i + 1}",
            yref="paper",
            x0=h * n_positions - 0.5,
            x1=h * n_positions - 0.5,
            y0=0,
            y1=1,
            line=dict(color="white", width=2),
        )
        for i in range(len(panels))
        for h in range(1, n_heads)
    ]
    return figure(
        data,
        title=f"Each head's output at each position patched from the clean run into the corrupted one: "
        f"recovered {what}",
        height=max(340, 160 + 22 * n_layers),
        shapes=shapes,
        **layout,
    )


def _score_panels(panels: dict[str, np.ndarray], x_axis, hover, customdata=None) -> tuple[list, dict]:
    """One heatmap per method side by side on one diverging scale centred at 0, their x axes from
    `x_axis(name, domain)` and hover templates from `hover(name)`.  # panels: name -> [L, columns]"""
    names = list(panels)
    finite = [np.abs(p[np.isfinite(p)]) for p in panels.values()]
    limit = float(max((f.max(initial=0) for f in finite), default=0)) or 1.0
    data, layout = [], {}
    width = 1.0 / max(len(names), 1)
    for i, name in enumerate(names):
        suffix = "" if i == 0 else str(i + 1)
        panel = dict(
            type="heatmap",
            z=panels[name].astype(np.float32),
            zmid=0.0,
            zmin=-limit,
            zmax=limit,
            colorscale=get_colorscale("RdBu"),
            showscale=i == len(names) - 1,
            colorbar=dict(title=dict(text="recovered"), thickness=12),
            xaxis=f"x{suffix}",
            yaxis=f"y{suffix}",
            name=name,
            hovertemplate=hover(name),
        )
        if customdata is not None:
            panel["customdata"] = customdata
        data.append(panel)
        gap = 0.06 if len(names) > 1 else 0.0
        layout[f"xaxis{suffix}"] = x_axis(name, [i * width, (i + 1) * width - gap])
        layout[f"yaxis{suffix}"] = dict(
            title=dict(text="layer" if i == 0 else ""), autorange="reversed", anchor=f"x{suffix}", **INTEGERS
        )
    return data, layout


@builds_figure
def circuit_figure(
    upstream: list[tuple],
    downstream: list[tuple],
    scores: np.ndarray,
    n_layers: int,
    n_heads: int,
    group: int,
) -> Plot:
    """The circuit's kept edges: each component placed by layer (rows) and head (columns), the
    embedding on top and the logits below, a kv head's k and v inputs amid the `group` query heads that
    read them; one line per edge, the strongest thicker, its colour by the input it feeds (q, k, v, MLP,
    logits).  # scores [E], upstream[i] -> downstream[i]"""
    strongest = float(np.abs(scores).max(initial=0)) or 1.0
    lines: dict[str, dict] = {}
    for up, down, score in zip(upstream, downstream, scores, strict=True):
        x0, y0 = _place(up, n_layers, n_heads, group, below=False)
        x1, y1 = _place(down, n_layers, n_heads, group, below=True)
        kind = down[0]
        trace = lines.setdefault(kind, dict(x=[], y=[], text=[]))
        trace["x"] += [x0, x1, None]
        trace["y"] += [y0, y1, None]
        trace["text"] += [f"{_name(up)} → {_name(down)}: {score:.3g}"] * 2 + [None]
    data = [
        dict(
            type="scatter",
            mode="lines",
            x=t["x"],
            y=t["y"],
            text=t["text"],
            hoverinfo="text",
            name=f"into {kind}",
            line=dict(color=INPUT_COLOURS.get(kind, "#7f7f7f"), width=2),
            opacity=0.7,
        )
        for kind, t in lines.items()
    ]
    for kind in lines:  # a line's width is one per trace: the strongest edges drawn again, thicker
        strong = [
            (u, d, s)
            for u, d, s in zip(upstream, downstream, scores, strict=True)
            if d[0] == kind and abs(s) >= strongest / 2
        ]
        if strong:
            xs, ys = [], []
            for u, d, _ in strong:
                (x0, y0), (x1, y1) = (
                    _place(u, n_layers, n_heads, group, False),
                    _place(d, n_layers, n_heads, group, True),
                )
                xs += [x0, x1, None]
                ys += [y0, y1, None]
            data.append(
                dict(
                    type="scatter",
                    mode="lines",
                    x=xs,
                    y=ys,
                    hoverinfo="skip",
                    showlegend=False,
                    line=dict(color=INPUT_COLOURS.get(kind, "#7f7f7f"), width=5),
                )
            )
    heads = sorted({(u[1], u[2]) for u in upstream if u[0] == "head"} | _head_readers(downstream))
    data.append(
        dict(
            type="scatter",
            mode="markers",
            x=[h for _, h in heads],
            y=[layer for layer, _ in heads],
            customdata=[[layer, h] for layer, h in heads],
            marker=dict(size=9, color="#333"),
            name="heads",
            hovertemplate="head %{customdata[0]}.%{customdata[1]}<extra></extra>",
        )
    )
    return figure(
        data,
        title=f"The circuit: its {len(scores):,} strongest edges (thick: strongest; colour: what they feed)",
        xaxis=dict(title=dict(text="head (MLP right of the heads)"), **INTEGERS),
        yaxis=dict(
            title=dict(text="layer (embedding above, logits below)"), autorange="reversed", **INTEGERS
        ),
        height=max(360, 180 + 26 * n_layers),
    )


def _head_readers(downstream: list[tuple]) -> set[tuple[int, int]]:
    return {(d[1], d[2]) for d in downstream if d[0] == "q"}


def _place(node: tuple, n_layers: int, n_heads: int, group: int, below: bool) -> tuple[float, float]:
    """Where a node sits: a head at (head, layer), the MLP right of the heads, the embedding above
    layer 0 and the logits below the last layer; an input sits a little above its head (k and v of a
    kv head amid its group of query heads)."""
    kind = node[0]
    if kind == "embedding":
        return (n_heads - 1) / 2, -1.0
    if kind == "logits":
        return (n_heads - 1) / 2, float(n_layers)
    if kind == "mlp":
        return float(n_heads), node[1] + (-0.25 if below else 0.0)
    if kind in ("k", "v"):
        return (node[2] + 0.5) * group - 0.5, node[1] - 0.25
    return float(node[2]), node[1] + (-0.25 if below else 0.0)


def _name(node: tuple) -> str:
    kind = node[0]
    if kind in ("embedding", "logits"):
        return kind
    if kind == "mlp":
        return f"MLP {node[1]}"
    if kind == "head":
        return f"head {node[1]}.{node[2]}"
    return f"{kind} of {'kv head' if kind in ('k', 'v') else 'head'} {node[1]}.{node[2]}"


@builds_figure
def faithfulness_curve_figure(kept: np.ndarray, recovered: np.ndarray, total: int, chosen: int) -> Plot:
    """The metric recovered by the circuit of the top edges, measured exactly, against how many edges
    it keeps; the slider's choice marked.  # kept [K], recovered [K]"""
    share = 100 * kept / max(total, 1)
    data = [
        dict(
            type="scatter",
            mode="lines+markers",
            x=kept.astype(np.float64),
            y=recovered.astype(np.float64),
            customdata=share,
            hovertemplate="%{x:,} edges (%{customdata:.1f}%)<br>recovered %{y:.3g}<extra></extra>",
            name="circuit",
        )
    ]
    return figure(
        data,
        title="Faithfulness: the metric the circuit of the top edges recovers, measured exactly",
        xaxis=dict(title=dict(text=f"edges kept (of {total:,})")),
        yaxis=dict(title=dict(text="recovered (1: clean, 0: corrupted)")),
        shapes=[
            dict(type="line", x0=chosen, x1=chosen, yref="paper", y0=0, y1=1, line=dict(dash="dot")),
        ],
        height=340,
    )

"""What every figure shares: the house style, one-step figure building, subplot grids, and token axes.

Axes over tokens are numeric positions 0..N−1. Token text reaches the tick labels and the hover
through Plotly's `labelalias` ("12" -> "␣the"), so repeated tokens never merge (as they would on a
category axis), and a hovertemplate shows both: `%{x:d}` is the position, `%{x}` its token. In
figures whose axes all run over tokens, the labels sit once in the figure's template
(`template.layout.xaxis/yaxis` are defaults for every axis), not once per panel.

Token text is escaped before it reaches a figure: Plotly renders labels as HTML-like markup, and a
prompt is shown as the literal text it is.
"""

from __future__ import annotations

import base64
import functools
import html
import json
import math

import numpy as np
import plotly.graph_objects as go
from plotly.utils import PlotlyJSONEncoder

from explorer.engine.tokens import printable
from explorer.figures.codec import compact_trace
from explorer.figures.plot import Plot

# numpy dtypes Plotly's typed arrays hold, by their short name in plotly.js ({dtype, bdata, shape})
PLOTLY_JS_TYPES = {
    "int8": "i1", "uint8": "u1", "int16": "i2", "uint16": "u2",
    "int32": "i4", "uint32": "u4", "float32": "f4", "float64": "f8",
}  # fmt: skip
MAX_TICK_LABELS = 20  # per axis; beyond, every k-th position is labelled (hover still names every one)
SHORT_END = "\u2063"  # invisible separator: a tick label ends here, its hover goes on
GROUP_COLOURS = ("#2563eb", "#d97706", "#059669", "#db2777", "#7c3aed", "#0891b2", "#65a30d", "#dc2626")
TITLE_STANDOFF = 6  # px between an axis' tick labels and its title
FONT = "ui-sans-serif, system-ui, -apple-system, 'Segoe UI', sans-serif"

HOUSE_LAYOUT = dict(
    font=dict(family=FONT, size=12, color="#1f2937"),
    paper_bgcolor="white",
    plot_bgcolor="white",
    hoverlabel=dict(font=dict(family=FONT, size=12)),
    margin=dict(l=60, r=20, t=60, b=50),
    title=dict(x=0.01, xanchor="left", font=dict(size=14)),
)


def figure(data: list[dict], tokens: list[str] | None = None, title: str | None = None, **layout) -> Plot:
    """A figure in the house style, built in one step from plain dicts (with `tokens`, every axis
    defaults to a token axis; `title` is the figure's), as plain values (`Plot`)."""
    defaults = dict(HOUSE_LAYOUT)
    if tokens is not None:
        axis = token_axis(tokens)
        defaults.update(xaxis=axis, yaxis=axis)
    if title is not None:
        layout["title"] = dict(text=title)
    return Plot(data, dict(template=dict(layout=defaults), **layout))


def to_json(fig: Plot | go.Figure, config: dict | None = None, compact: bool = False) -> str:
    """The figure as compact JSON, typed arrays as base64 `bdata` (with Plotly's `config`, if given).

    Unlike `fig.to_json()` it does not escape '<', '>' and '/' for embedding in an HTML <script>: the
    app's JSON is read by JSON.parse, and escaping '/' alone grows base64 arrays by a tenth.
    `compact` leaves out the values of traces whose `meta.derived` says how to rebuild them from
    another trace's, and sends a `meta.packed` map's lower triangle alone (the app's page script
    rebuilds both before drawing, bit for bit)."""
    return json_text(sendable(fig, config, compact))


def json_text(plot: dict) -> str:
    """A figure's plain values (`sendable`) as compact JSON (NaN as null, as Plotly writes it)."""
    return json.dumps(plot, cls=PlotlyJSONEncoder, separators=(",", ":"))


def sendable(fig: Plot | go.Figure, config: dict | None = None, compact: bool = False) -> dict:
    """The figure as `to_json` writes it, as plain values: numpy arrays that are a property's value as
    typed-array specs (base64 `bdata`, as `fig.to_plotly_json()` writes them), other numpy values as
    Python's. A `Plot` is read as it is,
    without the checks and the deep copy of a `go.Figure`'s; the figure is not changed."""
    if isinstance(fig, go.Figure):
        fig = Plot(**fig.to_plotly_json())
    plot = {"data": [_sendable(trace) for trace in fig.data], "layout": _sendable(fig.layout)}
    plot |= {"config": config} if config else {}
    if compact:
        plot["data"] = [compact_trace(trace) for trace in plot["data"]]
    return plot


def sendable_traces(data: list[dict]) -> list[dict]:
    """Traces as `sendable(fig, compact=True)` gives them inside a figure, without its layout (a head's
    pipeline beside another's: `PipelineParts`)."""
    return [compact_trace(_sendable(trace)) for trace in data]


def _typed_array(values: np.ndarray) -> dict | list:
    """A numpy array as Plotly's `to_typed_array_spec` writes it ({dtype, bdata, shape}, 64-bit integers
    narrowed to the smallest type that holds them; an empty or non-numeric one as a list), without its
    copies and its checks for other array types."""
    if values.size and values.dtype in (np.int64, np.uint64):
        low, high = values.min(), values.max()
        for kind in ("int8", "int16", "int32") if values.dtype == np.int64 else ("uint8", "uint16", "uint32"):
            if np.iinfo(kind).min <= low and high <= np.iinfo(kind).max:
                values = values.astype(kind)
                break
    dtype = PLOTLY_JS_TYPES.get(str(values.dtype))
    if not values.size or dtype is None:
        return values.tolist()
    spec = {"dtype": dtype, "bdata": base64.b64encode(np.ascontiguousarray(values)).decode("ascii")}
    return spec | ({"shape": str(values.shape)[1:-1]} if values.ndim > 1 else {})


_NOT_TYPED = frozenset(("geojson", "layer", "layers", "range"))  # as Plotly's convert_to_base64
_AS_GIVEN = frozenset(("meta", "labelalias"))  # values of any kind: Plotly keeps their None


def _sendable(value, drop_none: bool = True):
    """`value` as plain JSON values; a property set to None is left out, as Plotly leaves it."""
    if isinstance(value, dict):
        return {
            key: _typed_array(v)
            if isinstance(v, np.ndarray) and key not in _NOT_TYPED
            else _sendable(v, drop_none and key not in _AS_GIVEN)
            for key, v in value.items()
            if v is not None or not drop_none
        }
    if isinstance(value, list | tuple):
        return [_sendable(v, drop_none) for v in value]
    if isinstance(value, np.ndarray | np.generic):
        return value.tolist()
    return value


def export_config(fig: Plot | go.Figure, name: str = "attention-explorer") -> dict:
    """Plotly's config for a figure in the app: the modebar's download gives an SVG at publication
    size, 1,600 px wide at the figure's height (the page adds a PNG button beside it), or wider where
    the figure needs it (`layout.meta.min_width`: the lens' grid, a column a position)."""
    layout = fig.layout if isinstance(fig, Plot) else fig.to_plotly_json()["layout"]
    height = int(layout.get("height") or 500)
    width = max(1600, int((layout.get("meta") or {}).get("min_width", 0)))
    return dict(
        displaylogo=False,
        toImageButtonOptions=dict(format="svg", filename=name, width=width, height=height, scale=1),
    )


def grid(
    n_cells: int,
    cols: int,
    h_gap: float = 0.02,
    v_gap: float = 0.08,
    titles: list[str] | None = None,
    linked: bool = True,
) -> tuple[dict, list[tuple[str, str]]]:
    """Axes for `n_cells` panels laid out row by row, `cols` to a row: the layout entries (xaxisN and
    yaxisN with their domains, a title annotation above each panel) and each panel's (x, y) axis ids.
    `linked`: zoom one panel, zoom them all."""
    rows = math.ceil(n_cells / cols)
    width, height = (1 - h_gap * (cols - 1)) / cols, (1 - v_gap * (rows - 1)) / rows
    layout: dict = {"annotations": []}
    cells = []
    for i in range(n_cells):
        row, col = divmod(i, cols)
        x0, y1 = col * (width + h_gap), 1 - row * (height + v_gap)
        n = "" if i == 0 else str(i + 1)
        follow = linked and i > 0
        layout[f"xaxis{n}"] = dict(
            domain=[x0, x0 + width], anchor=f"y{n}", **({"matches": "x"} if follow else {})
        )
        layout[f"yaxis{n}"] = dict(
            domain=[y1 - height, y1], anchor=f"x{n}", **({"matches": "y"} if follow else {})
        )
        cells.append((f"x{n}", f"y{n}"))
        if titles:
            layout["annotations"].append(
                dict(
                    text=titles[i],
                    x=x0 + width / 2,
                    y=y1,
                    xref="paper",
                    yref="paper",
                    xanchor="center",
                    yanchor="bottom",
                    showarrow=False,
                    font=dict(size=13),
                )
            )
    return layout, cells


def axis_title(text: str) -> dict:
    """An axis title standing off its tick labels: on an axis with `automargin`, Plotly makes room
    for both, however long the labels (a token's)."""
    return dict(text=text, standoff=TITLE_STANDOFF)


def colorbar_at_foot(layout: dict, x_axis: str) -> dict:
    """A horizontal colour bar at the foot of the figure, under the panel of `x_axis` ("x3") and as wide
    as it. Placed on the figure (yref "container"), not the plot area, Plotly reserves its room below
    whatever the axes push: tick labels as long as a token, then the axis title, then the bar."""
    start, end = layout[f"xaxis{x_axis[1:]}"]["domain"]
    return dict(
        orientation="h",
        x=(start + end) / 2,
        xanchor="center",
        len=0.9 * (end - start),
        yref="container",
        y=0,
        yanchor="bottom",
        ypad=6,
        thickness=10,
    )


def group_colour(kv: int) -> str:
    """The colour of a kv group, the same in every figure."""
    return GROUP_COLOURS[kv % len(GROUP_COLOURS)]


def token_label(token: str) -> str:
    """A token as a label: whitespace and control characters made visible, then escaped for Plotly's
    HTML-like text (<, > and &; Plotly decodes &lt; &gt; &amp; but shows &quot; as written)."""
    return html.escape(printable(token), quote=False)


def hover_label(token: str) -> str:
    """A token as an axis names it: its label, and for a token holding part of a character (see
    `explorer.engine.tokens`) what it holds, after SHORT_END. Hover shows it all; the page's script cuts tick
    labels at SHORT_END, so ticks stay short ("é¹" on the axis, "é¹ (byte 1 of 2 of “é”)" in hover)."""
    label = token_label(token)
    hover = getattr(token, "hover", token)
    if hover == token:
        return label
    return label + SHORT_END + token_label(hover[len(token) :])


def quoted_token(token: str) -> str:
    """A token inside running text: its label in quotation marks, so a leading space shows, and for a
    token holding part of a character, which bytes of which character after them."""
    note = getattr(token, "hover", token)[len(token) :]
    return f"“{token_label(token)}”" + (html.escape(note, quote=False) if note else "")


@functools.lru_cache(maxsize=8)
def _labels(tokens: tuple[tuple[str, str], ...]) -> dict[str, str]:
    """Each position's hover label, by the tokens and what each holds (a prompt's figures of every
    layer and head label the same tokens: labelled once).  # (token, hover) per position"""
    return {str(i): hover_label(token) for i, (token, _) in enumerate(tokens)}


def token_axis(tokens: list[str], max_labels: int = MAX_TICK_LABELS) -> dict:
    """A numeric axis over positions, labelled (ticks and hover) with the tokens' text."""
    return dict(
        tickmode="linear",
        tick0=0,
        dtick=max(1, math.ceil(len(tokens) / max_labels)),
        tickformat="d",
        hoverformat="d",
        labelalias=dict(_labels(tuple((t, getattr(t, "hover", t)) for t in tokens))),
        showgrid=False,
        zeroline=False,
        # The page hides a label past the figure's edge itself, from the boxes it measures anyway to
        # thin overlapping labels; Plotly's own check ("hide past div") measured each label again.
        ticklabeloverflow="allow",
    )

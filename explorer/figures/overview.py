"""The whole prompt at a glance: what every head of every layer does, and what the model predicts next."""

from __future__ import annotations

import math

import numpy as np
from plotly.colors import get_colorscale

from explorer.figures.common import axis_title, colorbar_at_foot, figure, grid, hover_label
from explorer.figures.plot import Plot, builds_figure

PROFILE_PANELS = {  # score name -> (title, colour scale, fixed range or None for [0, max])
    "previous_token": ("previous-token score", "Blues", (0.0, 1.0)),
    "sink": ("sink score (to position 0)", "Purples", (0.0, 1.0)),
    "induction": ("induction (on this prompt)", "Reds", (0.0, 1.0)),
    "entropy": ("entropy (nats)", "Greens", None),
    "distance": ("mean distance (tokens)", "Oranges", None),
}


GLOBAL_ROW = dict(color="#334155", width=1.5)  # the outline of a global layer's row


@builds_figure
def profile_figure(
    profile: dict[str, np.ndarray], kv_head: np.ndarray, global_layers: list[int] = (), window: int = 0
) -> Plot:
    """One layers × heads grid per score, side by side; in a model with both kinds of layer, the
    `global_layers` (which see every key, where the rest slide over `window` keys) outlined, in bold
    on the layer axis and named in the title.  # profile {name: [L, H]}, kv_head [H]"""
    n_layers, n_heads = profile["previous_token"].shape
    titles = [
        title + ("<br>(no token repeats)" if np.isnan(profile[name]).all() else "")
        for name, (title, _, _) in PROFILE_PANELS.items()
    ]
    wrapped = any("<br>" in title for title in titles)
    layout, cells = grid(
        len(PROFILE_PANELS), cols=len(PROFILE_PANELS), h_gap=0.06, titles=titles, linked=False
    )
    kv_of_cell = np.ascontiguousarray(
        np.broadcast_to(kv_head.astype(np.int32), (n_layers, n_heads))
    )  # [L, H]
    data, shapes = [], []
    for (name, (title, colorscale, fixed)), (x, y) in zip(PROFILE_PANELS.items(), cells, strict=True):
        values = profile[name].astype(np.float32)
        low, high = fixed or (0.0, float(np.nanmax(values)) or 1.0)
        data.append(
            dict(
                type="heatmap",
                z=values,
                xaxis=x,
                yaxis=y,
                zmin=low,
                zmax=high,
                colorscale=get_colorscale(colorscale),
                colorbar=colorbar_at_foot(layout, x) | _level_ticks(high),
                customdata=kv_of_cell,
                hoverongaps=False,
                hovertemplate=f"layer %{{y}} · head %{{x}} · kv %{{customdata}}<br>{title}: %{{z:.3g}}"
                "<extra></extra>",
            )
        )
        # Ranges named, not autoranged: the frame the page draws around the picked head (a shape, whose
        # line Plotly's autorange would make room for) must not move the cells.
        integers = dict(tickmode="linear", tick0=0, showgrid=False, zeroline=False)
        layout[f"xaxis{x[1:]}"].update(
            integers,
            dtick=math.ceil(n_heads / 12),
            range=[-0.5, n_heads - 0.5],
            title=axis_title("head"),
            automargin=True,
        )
        layout[f"yaxis{y[1:]}"].update(
            integers,
            dtick=1,
            range=[n_layers - 0.5, -0.5],  # layer 0 on top
            title=dict(text="layer") if y == "y" else None,
        )
        if global_layers:  # in bold on every panel's layer axis, their rows outlined (the title names them)
            named = {str(layer): f"<b>{layer}</b>" for layer in global_layers}
            layout[f"yaxis{y[1:]}"]["labelalias"] = named
            rows = [(layer - 0.5, layer + 0.5) for layer in global_layers]
            shapes += [
                dict(type="rect", xref=x, yref=y, x0=-0.5, x1=n_heads - 0.5, y0=y0, y1=y1, line=GLOBAL_ROW)
                for y0, y1 in rows
            ]
    title = "What each head does on this prompt (layers × heads): pick a layer and head to look closer"
    if global_layers:
        listed = ", ".join(map(str, global_layers))
        note = f"global layers (every earlier key) outlined: {listed}; the others slide over {window:,} keys"
        title += f"<br><sup>{note}</sup>"
    if shapes:
        layout["shapes"] = shapes
    return figure(
        data,
        title=title,
        height=max(360, 170 + 26 * n_layers) + (20 if wrapped else 0),
        margin=dict(b=30, t=80 if wrapped or global_layers else 60),  # two lines of title need the room
        **layout,
    )


@builds_figure
def next_tokens_figure(top: list[tuple[str, float]]) -> Plot:
    """The most likely next tokens after the prompt, most likely on top."""
    probs = np.array([p for _, p in top], dtype=np.float32)
    bars = dict(
        type="bar",
        x=probs,
        y=np.arange(len(top), dtype=np.int32),
        orientation="h",
        marker=dict(color="#2563eb"),
        text=[f"{p:.1%}" for p in probs],
        textposition="outside",
        hovertemplate="next token %{y}<br>probability %{x:.3g}<extra></extra>",
    )
    labels = {str(i): hover_label(token) for i, (token, _) in enumerate(top)}
    return figure(
        [bars],
        title="Most likely next tokens",
        xaxis=dict(title=dict(text="probability"), range=[0, min(1.0, float(probs.max()) * 1.25 + 1e-3)]),
        yaxis=dict(
            autorange="reversed", tickmode="linear", tick0=0, dtick=1, tickformat="d", labelalias=labels
        ),
        height=80 + 28 * len(top),
        margin=dict(l=100),
    )


def _level_ticks(high: float) -> dict:
    """Three level ticks for a bar whose labels run to three digits (a mean distance in the hundreds):
    Plotly would stand five such labels on end, below the figure's foot where they are cut."""
    return dict(nticks=3, tickangle=0) if high >= 100 else {}

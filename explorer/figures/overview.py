"""The whole prompt at a glance: what every head of every layer does, and what the model predicts next."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from explorer.figures.common import house_template, token_label

PROFILE_PANELS = {  # score name -> (title, colour scale, fixed range or None for [0, max])
    "previous_token": ("previous-token score", "Blues", (0.0, 1.0)),
    "sink": ("sink score (to position 0)", "Purples", (0.0, 1.0)),
    "entropy": ("entropy (nats)", "Greens", None),
    "distance": ("mean distance (tokens)", "Oranges", None),
}


def profile_figure(profile: dict[str, np.ndarray], kv_head: np.ndarray) -> go.Figure:
    """One layers × heads grid per score, side by side.  # profile {name: [L, H]}, kv_head [H]"""
    n_layers, n_heads = profile["previous_token"].shape
    titles = [title for title, _, _ in PROFILE_PANELS.values()]
    fig = make_subplots(rows=1, cols=len(PROFILE_PANELS), horizontal_spacing=0.06, subplot_titles=titles)
    kv_of_cell = np.broadcast_to(kv_head.astype(np.int32), (n_layers, n_heads))  # [L, H]
    for col, (name, (title, colorscale, fixed)) in enumerate(PROFILE_PANELS.items(), start=1):
        values = profile[name].astype(np.float32)
        low, high = fixed or (0.0, float(values.max()) or 1.0)
        start, end = fig.get_subplot(1, col).xaxis.domain
        bar = dict(
            orientation="h", x=(start + end) / 2, xanchor="center", len=end - start, y=-0.3, thickness=10
        )
        fig.add_trace(
            go.Heatmap(
                z=values,
                zmin=low,
                zmax=high,
                colorscale=colorscale,
                colorbar=bar,
                customdata=np.ascontiguousarray(kv_of_cell),
                hovertemplate=f"layer %{{y}} · head %{{x}} · kv %{{customdata}}<br>{title}: %{{z:.3f}}"
                "<extra></extra>",
            ),
            row=1,
            col=col,
        )
    axis = dict(tickmode="linear", tick0=0, dtick=1, showgrid=False, zeroline=False)
    fig.update_xaxes(axis)
    fig.update_yaxes(axis, autorange="reversed", title_text="layer")
    fig.update_layout(
        template=house_template(),
        title="What each head does on this prompt (layers × heads): pick a layer and head above to look"
        " closer",
        height=max(360, 240 + 26 * n_layers),
        margin=dict(b=100),
    )
    return fig


def next_tokens_figure(top: list[tuple[str, float]]) -> go.Figure:
    """The most likely next tokens after the prompt, most likely on top."""
    labels = [token_label(token) for token, _ in top]
    probs = np.array([p for _, p in top], dtype=np.float32)
    fig = go.Figure(
        go.Bar(
            x=probs,
            y=np.arange(len(top)),
            orientation="h",
            marker_color="#2563eb",
            text=[f"{p:.1%}" for p in probs],
            textposition="outside",
            hovertemplate="next token %{y}<br>probability %{x:.4f}<extra></extra>",
        )
    )
    fig.update_layout(
        template=house_template(),
        title="Most likely next tokens",
        xaxis=dict(title="probability", range=[0, min(1.0, float(probs.max()) * 1.25 + 1e-3)]),
        yaxis=dict(
            autorange="reversed",
            tickmode="linear",
            tick0=0,
            dtick=1,
            tickformat="d",
            hoverformat="d",
            labelalias={str(i): label for i, label in enumerate(labels)},
        ),
        height=80 + 28 * len(top),
        margin=dict(l=100),
    )
    return fig

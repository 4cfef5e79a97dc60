"""RoPE, pictured: the angle of every frequency pair at every position, each pair's wavelength against
the context, one q and one k rotated pair by pair, and a score q·k split over the pairs.

Frequency pair i holds coordinates (x[i], x[i + d/2]) (rotate-half, as HF Llama) and turns by m·θ_i at
position m. Pairs are given here as [d/2, 2] arrays, already split.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from explorer.figures.common import house_template, token_axis, token_label

ANGLE_COLORSCALE = "Twilight"  # cyclic: −π and π meet
PAIR_COLORSCALE = "Viridis"
ARC_POINTS = 12


def wrap_angle(angles: np.ndarray) -> np.ndarray:
    """Radians wrapped to (−π, π]."""
    wrapped = np.mod(angles + np.pi, 2 * np.pi) - np.pi  # [−π, π)
    return np.where(wrapped == -np.pi, np.pi, wrapped).astype(np.float32)


def rope_angles_figure(tokens: list[str], angles: np.ndarray) -> go.Figure:
    """Rotation angle m·θ_i wrapped to (−π, π], positions × frequency pairs.  # angles [N, d/2]"""
    fig = go.Figure(
        go.Heatmap(
            z=wrap_angle(angles),
            zmin=-np.pi,
            zmax=np.pi,
            colorscale=ANGLE_COLORSCALE,
            colorbar=dict(
                thickness=10,
                tickvals=[-np.pi, -np.pi / 2, 0, np.pi / 2, np.pi],
                ticktext=["−π", "−π/2", "0", "π/2", "π"],
            ),
            hovertemplate="position %{y:d} %{y}<br>pair %{x}<br>m·θ = %{z:.3f} rad (wrapped)<extra></extra>",
        )
    )
    fig.update_layout(
        template=house_template(),
        title="RoPE angle m·θᵢ of every position and frequency pair, wrapped to (−π, π]",
        xaxis=dict(title="frequency pair i (fast → slow)", showgrid=False, zeroline=False),
        yaxis=dict(token_axis(tokens), title="position m", autorange="reversed"),
        height=420,
    )
    return fig


def wavelengths_figure(wavelengths: np.ndarray, context_length: int, n_tokens: int) -> go.Figure:
    """Each pair's wavelength 2π/θ_i in tokens, against the model's context and this prompt."""
    pairs = np.arange(len(wavelengths))
    fig = go.Figure(
        go.Scatter(
            x=pairs,
            y=wavelengths.astype(np.float32),
            mode="markers+lines",
            marker=dict(color=pairs, colorscale=PAIR_COLORSCALE, size=7),
            line=dict(color="#9ca3af", width=1),
            hovertemplate="pair %{x}<br>wavelength %{y:.4g} tokens<extra></extra>",
            name="wavelength of pair i",
        )
    )
    for length, label, dash in ((context_length, "context", "dash"), (n_tokens, "this prompt", "dot")):
        fig.add_trace(
            go.Scatter(
                x=[-0.5, len(pairs) - 0.5],
                y=[length, length],
                mode="lines",
                line=dict(color="#374151", dash=dash, width=1),
                name=f"{label}: {length} tokens",
                hovertemplate=f"{label}: {length} tokens<extra></extra>",
            )
        )
    fig.update_layout(
        template=house_template(),
        title="Wavelength of each pair: below the line it turns within the context (position);"
        "<br>above, it barely turns (content)",
        xaxis=dict(title="frequency pair i", zeroline=False),
        yaxis=dict(title="wavelength 2π/θᵢ (tokens)", type="log"),
        legend=dict(orientation="h", x=0, y=-0.2, yanchor="top"),
        height=440,
        margin=dict(t=80, b=110),
    )
    return fig


def rotation_figure(
    q: np.ndarray,  # [d/2, 2] the query's pairs before RoPE
    q_rot: np.ndarray,  # [d/2, 2] after
    k: np.ndarray,  # [d/2, 2] the key's pairs before RoPE
    k_rot: np.ndarray,  # [d/2, 2] after
    query: tuple[int, str],  # (position, token)
    key: tuple[int, str],
) -> go.Figure:
    """Every pair of one q and one k before (hollow) and after (filled) rotation, in the plane: each
    point turns about the origin on its own circle, so every pair's norm, and the vector's, is kept."""
    titles = [
        f"q at m = {query[0]} ({token_label(query[1])}): ‖q‖ {_norm(q):.4g} → {_norm(q_rot):.4g}",
        f"k at n = {key[0]} ({token_label(key[1])}): ‖k‖ {_norm(k):.4g} → {_norm(k_rot):.4g}",
    ]
    fig = make_subplots(rows=1, cols=2, specs=[[{"type": "polar"}] * 2], subplot_titles=titles)
    for col, (before, after, name) in enumerate(((q, q_rot, "q"), (k, k_rot, "k")), start=1):
        for trace in _rotation_traces(before, after, name):
            fig.add_trace(trace, row=1, col=col)
    fig.update_polars(
        angularaxis=dict(direction="counterclockwise", rotation=0, tickfont=dict(size=10)),
        radialaxis=dict(angle=90, tickangle=90, nticks=4, tickfont=dict(size=9, color="#6b7280")),
    )
    for annotation in fig.layout.annotations:
        annotation.yshift = 20
    fig.update_layout(
        template=house_template(),
        title="RoPE turns each pair on its own circle, so norms are kept (hollow: before, filled: after)",
        height=440,
        margin=dict(t=100, b=30),
        showlegend=False,
    )
    return fig


def _norm(pairs: np.ndarray) -> float:
    return float(np.linalg.norm(pairs))


def _rotation_traces(before: np.ndarray, after: np.ndarray, name: str) -> list[go.Scatterpolar]:
    radius = np.linalg.norm(before, axis=1)  # [d/2], the same after
    start = np.degrees(np.arctan2(before[:, 1], before[:, 0]))
    end = np.degrees(np.arctan2(after[:, 1], after[:, 0]))
    turn = (end - start + 180) % 360 - 180  # the short way round
    pairs = np.arange(len(radius))
    t = np.linspace(0, 1, ARC_POINTS)
    arcs_theta = np.concatenate([np.append(start[i] + turn[i] * t, np.nan) for i in pairs])
    arcs_r = np.concatenate([np.append(np.full(ARC_POINTS, radius[i]), np.nan) for i in pairs])
    marker = dict(color=pairs, colorscale=PAIR_COLORSCALE, size=8)

    def hover(stage: str) -> str:
        return (
            f"pair %{{customdata}}<br>|{name}ᵢ| = %{{r:.4g}}<br>angle %{{theta:.1f}}°<extra>{stage}</extra>"
        )

    return [
        go.Scatterpolar(
            r=arcs_r.astype(np.float32),
            theta=arcs_theta.astype(np.float32),
            mode="lines",
            line=dict(color="#d1d5db", width=1),
            hoverinfo="skip",
        ),
        go.Scatterpolar(
            r=radius.astype(np.float32),
            theta=start.astype(np.float32),
            mode="markers",
            marker=dict(marker, symbol="circle-open", line=dict(width=1.5)),
            customdata=pairs,
            hovertemplate=hover("before RoPE"),
        ),
        go.Scatterpolar(
            r=radius.astype(np.float32),
            theta=end.astype(np.float32),
            mode="markers",
            marker=marker,
            customdata=pairs,
            hovertemplate=hover("after RoPE"),
        ),
    ]


def score_split_figure(
    with_rope: np.ndarray,  # [d/2] pair i's share of q_rot·k_rot
    without_rope: np.ndarray,  # [d/2] pair i's share of q·k (no rotation)
    wavelengths: np.ndarray,  # [d/2] tokens
    query: tuple[int, str],
    key: tuple[int, str],
) -> go.Figure:
    """The score q·k as a sum over frequency pairs, with RoPE (at these positions) and without.

    Fast pairs (short wavelengths) turn a lot over the distance m − n, so their share depends on
    position; slow pairs barely turn, so with and without RoPE agree and their share is content."""
    distance = query[0] - key[0]
    pairs = np.arange(len(with_rope))
    turns = (distance / wavelengths).astype(np.float32)  # [d/2] turns pair i makes over m − n
    hover = (
        "pair %{x} (wavelength %{customdata[0]:.4g} tokens,"
        " %{customdata[1]:.3g} turns over m − n)<br>%{y:.4g}<extra>%{fullData.name}</extra>"
    )
    custom = np.stack([wavelengths.astype(np.float32), turns], axis=1)
    fig = go.Figure(
        [
            go.Bar(x=pairs, y=with_rope.astype(np.float32), name="with RoPE", marker_color="#2563eb"),
            go.Bar(x=pairs, y=without_rope.astype(np.float32), name="without RoPE", marker_color="#d1d5db"),
        ]
    )
    fig.update_traces(customdata=custom, hovertemplate=hover)
    fig.update_layout(
        template=house_template(),
        title=(
            f"q·k of query {query[0]} {token_label(query[1])} and key {key[0]} {token_label(key[1])}"
            f" (m − n = {distance}) = {with_rope.sum():.4g}, split over the pairs"
            f"<br><sup>without RoPE it would be {without_rope.sum():.4g}; fast pairs (left) carry"
            " position, slow pairs (right) carry content</sup>"
        ),
        barmode="group",
        bargap=0.15,
        xaxis=dict(title="frequency pair i (fast → slow)"),
        yaxis=dict(title="share of q·k", zeroline=True, zerolinecolor="#9ca3af"),
        legend=dict(orientation="h", x=1, xanchor="right", y=1.02, yanchor="bottom"),
        height=420,
        margin=dict(t=90),
    )
    return fig

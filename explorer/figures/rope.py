"""RoPE, pictured: the angle of every frequency pair at every position, each pair's wavelength against
the context, one q and one k rotated pair by pair, and a score q·k split over the pairs.

Frequency pair i holds coordinates (x[i], x[i + d/2]) (rotate-half, as HF Llama) and turns by m·θ_i at
position m. Pairs arrive here as [d/2, 2] arrays, already split.
"""

from __future__ import annotations

import numpy as np
from plotly.colors import get_colorscale

from explorer.figures import codec
from explorer.figures.common import axis_title, figure, quoted_token, token_axis
from explorer.figures.plot import Plot, builds_figure

ANGLE_COLORSCALE = get_colorscale("Twilight")  # cyclic: −π and π meet
PAIR_COLORSCALE = get_colorscale("Viridis")
ARC_POINTS = 12
PAIR_COLORBAR = dict(
    title=dict(text="frequency<br>pair i<br>(fast → slow)", side="top", font=dict(size=11)),
    thickness=10,
    len=0.75,
    y=0.42,
    outlinewidth=0,
)


def wrap_angle(angles: np.ndarray) -> np.ndarray:
    """Radians wrapped to (−π, π], float32 in float32 steps (π and 2π as float32), as the page redoes it."""
    angles = np.asarray(angles, dtype=np.float32)
    wrapped = np.mod(angles + np.pi, 2 * np.pi) - np.pi  # [−π, π)
    return np.where(wrapped == -np.pi, np.pi, wrapped).astype(np.float32)


@builds_figure
def rope_angles_figure(tokens: list[str], angles: np.ndarray, inv_freq: np.ndarray) -> Plot:
    """Rotation angle m·θ_i wrapped to (−π, π], positions × frequency pairs: `angles` [N, d/2] are
    float32(m × θ_i) of `inv_freq` θ [d/2]. The app sends the rule (`meta.derived`, op "angles": the
    θ_i and N, 0.4 MB less at 2,048 tokens) and the page computes the map as `wrap_angle` does, in
    float32, bit for bit."""
    heatmap = dict(
        type="heatmap",
        z=wrap_angle(angles),
        meta=codec.angles_rule(len(angles), inv_freq),
        zmin=-np.pi,
        zmax=np.pi,
        colorscale=ANGLE_COLORSCALE,
        colorbar=dict(
            thickness=10,
            tickvals=[-np.pi, -np.pi / 2, 0, np.pi / 2, np.pi],
            ticktext=["−π", "−π/2", "0", "π/2", "π"],
        ),
        hovertemplate="position %{y:d} “%{y}”<br>pair %{x}<br>m·θ = %{z:.3g} rad (wrapped)<extra></extra>",
    )
    return figure(
        [heatmap],
        title="RoPE angle m·θᵢ at every position and frequency pair"
        "<br><sup>wrapped to (−π, π]; fast pairs (left) turn every token, slow ones (right) barely</sup>",
        xaxis=dict(title=dict(text="frequency pair i (fast → slow)"), showgrid=False, zeroline=False),
        yaxis=dict(token_axis(tokens), title=axis_title("position m"), autorange="reversed", automargin=True),
        height=440,
        margin=dict(t=70),
    )


@builds_figure
def wavelengths_figure(
    wavelengths: np.ndarray,
    context_length: int,
    n_tokens: int,
    sliding: tuple[np.ndarray, float, float] | None = None,
) -> Plot:
    """Each pair's wavelength 2π/θ_i in tokens, against the model's context and this prompt. `sliding`:
    the sliding layers' own wavelengths, with both bases (sliding, full), for a model whose sliding
    layers turn by another base (Gemma 3): a line for each kind of layer."""
    pairs = np.arange(len(wavelengths), dtype=np.int32)
    lines = [(wavelengths, "wavelength of pair i", "#9ca3af", None)]
    if sliding is not None:
        local, local_base, full_base = sliding
        lines = [
            (wavelengths, f"full layers (base {full_base:,.0f})", "#9ca3af", "circle"),
            (local, f"sliding layers (base {local_base:,.0f})", "#6b7280", "diamond"),
        ]
    data = [
        dict(
            type="scatter",
            x=pairs,
            y=values.astype(np.float32),
            mode="markers+lines",
            marker=dict(color=pairs, colorscale=PAIR_COLORSCALE, size=7)
            | ({"symbol": symbol} if symbol else {}),
            line=dict(color=colour, width=1),
            name=name,
            hovertemplate=f"{name}<br>pair %{{x}}<br>wavelength %{{y:.4g}} tokens<extra></extra>"
            if sliding is not None
            else "pair %{x}<br>wavelength %{y:.4g} tokens<extra></extra>",
        )
        for values, name, colour, symbol in lines
    ]
    for length, label, dash in ((context_length, "context", "dash"), (n_tokens, "this prompt", "dot")):
        data.append(
            dict(
                type="scatter",
                x=[-0.5, len(pairs) - 0.5],
                y=[length, length],
                mode="lines",
                line=dict(color="#374151", dash=dash, width=1),
                name=f"{label}: {length} tokens",
                hovertemplate=f"{label}: {length} tokens<extra></extra>",
            )
        )
    return figure(
        data,
        title="Wavelength 2π/θᵢ of each frequency pair<br><sup>below the context line a pair turns within"
        " the context (position);<br>above it, it barely turns (content)</sup>",
        xaxis=dict(title=dict(text="frequency pair i"), zeroline=False),
        yaxis=dict(title=dict(text="wavelength (tokens)"), type="log", dtick=1),
        legend=dict(orientation="h", x=0, y=-0.2, yanchor="top"),
        height=440,
        margin=dict(t=90, b=110),
    )


@builds_figure
def rotation_figure(
    q: np.ndarray,  # [d/2, 2] the query's pairs before RoPE
    q_rot: np.ndarray,  # [d/2, 2] after
    k: np.ndarray,  # [d/2, 2] the key's pairs before RoPE
    k_rot: np.ndarray,  # [d/2, 2] after
    query: tuple[int, str],  # (position, token)
    key: tuple[int, str],
) -> Plot:
    """Every pair of one q and one k before (hollow) and after (filled) rotation, in the plane: each
    point turns about the origin on its own circle, so every pair's norm, and the vector's, is kept."""
    panels = (
        ("polar", q, q_rot, "q", f"q of {quoted_token(query[1])} at m = {query[0]}", [0.0, 0.44]),
        ("polar2", k, k_rot, "k", f"k of {quoted_token(key[1])} at n = {key[0]}", [0.56, 1.0]),
    )
    data, layout, annotations = [], {}, []
    for subplot, before, after, name, label, domain in panels:
        data += _rotation_traces(before, after, name, subplot, legend=subplot == "polar2")
        layout[subplot] = dict(
            domain=dict(x=domain, y=[0, 0.84]),
            angularaxis=dict(direction="counterclockwise", rotation=0, tickfont=dict(size=10)),
            radialaxis=dict(angle=90, tickangle=90, nticks=4, tickfont=dict(size=9, color="#6b7280")),
        )
        text = f"{label}<br>‖{name}‖ {_norm(before):.4g} → {_norm(after):.4g}"
        annotations.append(
            dict(
                text=text,
                x=sum(domain) / 2,
                y=0.93,
                xref="paper",
                yref="paper",
                yanchor="bottom",
                showarrow=False,
                font=dict(size=13),
            )
        )
    return figure(
        data,
        title="RoPE turns each pair on its own circle, so norms are kept"
        "<br><sup>hollow: before RoPE, filled: after, a grey arc between; colour: the frequency pair</sup>",
        annotations=annotations,
        height=480,
        margin=dict(t=110, b=30),
        showlegend=False,
        **layout,
    )


def _norm(pairs: np.ndarray) -> float:
    return float(np.linalg.norm(pairs))


def _rotation_traces(
    before: np.ndarray, after: np.ndarray, name: str, subplot: str, legend: bool = False
) -> list[dict]:
    """Each pair before (hollow) and after (filled) RoPE, joined by the arc it turns through; with
    `legend`, a colour bar naming the pairs."""
    radius = np.linalg.norm(before, axis=1).astype(np.float32)  # [d/2], the same after
    start = np.degrees(np.arctan2(before[:, 1], before[:, 0]))  # [d/2]
    end = np.degrees(np.arctan2(after[:, 1], after[:, 0]))
    turn = (end - start + 180) % 360 - 180  # the short way round
    pairs = np.arange(len(radius), dtype=np.int32)
    t = np.append(np.linspace(0, 1, ARC_POINTS), np.nan)  # one arc, then a break
    arcs_theta = (start[:, None] + turn[:, None] * t[None]).ravel()
    arcs_r = np.repeat(radius, len(t))
    marker = dict(color=pairs, colorscale=PAIR_COLORSCALE, size=8, cmin=0, cmax=max(len(pairs) - 1, 1))
    common = dict(type="scatterpolar", subplot=subplot, r=radius, customdata=pairs, mode="markers")

    def hover(stage: str) -> str:
        return (
            f"pair %{{customdata}}<br>|{name}ᵢ| = %{{r:.4g}}<br>angle %{{theta:.4g}}°<extra>{stage}</extra>"
        )

    return [
        dict(
            type="scatterpolar",
            subplot=subplot,
            r=arcs_r.astype(np.float32),
            theta=arcs_theta.astype(np.float32),
            mode="lines",
            line=dict(color="#9ca3af", width=1.2),
            hoverinfo="skip",
        ),
        dict(
            common,
            theta=start.astype(np.float32),
            marker=dict(marker, symbol="circle-open", line=dict(width=1.5)),
            hovertemplate=hover("before RoPE"),
        ),
        dict(
            common,
            theta=end.astype(np.float32),
            marker=dict(marker, showscale=legend, colorbar=PAIR_COLORBAR) if legend else marker,
            hovertemplate=hover("after RoPE"),
        ),
    ]


@builds_figure
def score_split_figure(
    with_rope: np.ndarray,  # [d/2] pair i's share of q_rot·k_rot
    without_rope: np.ndarray,  # [d/2] pair i's share of q·k (no rotation)
    wavelengths: np.ndarray,  # [d/2] tokens
    query: tuple[int, str],
    key: tuple[int, str],
) -> Plot:
    """The score q·k as a sum over frequency pairs, with RoPE (at these positions) and without.

    Fast pairs (short wavelengths) turn a lot over the distance m − n, so their share depends on
    position; slow pairs barely turn, so with and without RoPE agree and their share is content."""
    distance = query[0] - key[0]
    pairs = np.arange(len(with_rope), dtype=np.int32)
    turns = (distance / wavelengths).astype(np.float32)  # [d/2] turns pair i makes over m − n
    custom = np.stack([wavelengths.astype(np.float32), turns], axis=1)
    hover = (
        "pair %{x} (wavelength %{customdata[0]:.4g} tokens,"
        " %{customdata[1]:.3g} turns over m − n)<br>%{y:.4g}<extra>%{fullData.name}</extra>"
    )
    bars = [
        dict(y=with_rope.astype(np.float32), name="with RoPE", marker=dict(color="#2563eb")),
        dict(y=without_rope.astype(np.float32), name="without RoPE", marker=dict(color="#d1d5db")),
    ]
    title = (
        f"q·k of query {quoted_token(query[1])} ({query[0]}) and key {quoted_token(key[1])} ({key[0]})"
        f" = {with_rope.sum():.4g}, split over the pairs<br><sup>m − n = {distance}; without RoPE it"
        f" would be {without_rope.sum():.4g}; fast pairs (left) carry position, slow pairs (right)"
        " carry content</sup>"
    )
    return figure(
        [dict(type="bar", x=pairs, customdata=custom, hovertemplate=hover, **bar) for bar in bars],
        title=title,
        barmode="group",
        bargap=0.15,
        xaxis=dict(title=dict(text="frequency pair i (fast → slow)")),
        yaxis=dict(title=dict(text="share of q·k"), zeroline=True, zerolinecolor="#9ca3af"),
        legend=dict(orientation="h", x=1, xanchor="right", y=1.02, yanchor="bottom"),
        height=420,
        margin=dict(t=90),
    )

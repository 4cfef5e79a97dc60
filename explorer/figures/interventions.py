"""Interventions on heads: the next token before and after an ablation, and the patching heatmap."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.colors import get_colorscale

from explorer.figures.common import figure, quoted_token, token_label

BEFORE_COLOUR, AFTER_COLOUR = "#2563eb", "#dc2626"


def ablation_next_tokens_figure(
    tokens: list[str], before: np.ndarray, after: np.ndarray, ablation: str
) -> go.Figure:
    """Each token's next-token probability in the plain run and in the ablated one, paired bars, in the
    order given (most likely first).  # tokens [K], before [K], after [K]"""
    before, after = before.astype(np.float32), after.astype(np.float32)
    rows = np.arange(len(tokens), dtype=np.int32)
    bars = [
        dict(
            type="bar",
            name=name,
            x=probs,
            y=rows,
            orientation="h",
            marker_color=colour,
            text=[f"{p:.1%}" for p in probs],
            textposition="outside",
            hovertemplate=f"next token %{{y}}<br>{name}: %{{x:.3g}}<extra></extra>",
        )
        for name, probs, colour in (("before", before, BEFORE_COLOUR), ("after", after, AFTER_COLOUR))
    ]
    labels = {str(i): token_label(token) for i, token in enumerate(tokens)}
    top = float(max(before.max(initial=0), after.max(initial=0)))
    return figure(
        bars,
        title=f"Next token before and after the {ablation}",
        barmode="group",
        legend=dict(orientation="h", x=0, xanchor="left", y=1.0, yanchor="bottom"),  # under the title
        xaxis=dict(title=dict(text="probability"), range=[0, min(1.0, top * 1.3 + 1e-3)]),
        yaxis=dict(
            autorange="reversed", tickmode="linear", tick0=0, dtick=1, tickformat="d", labelalias=labels
        ),
        height=130 + 34 * len(tokens),
        margin=dict(l=100, t=84),
    )


def patching_figure(
    recovered: np.ndarray,
    logit_diff: np.ndarray,
    kv_head: np.ndarray,
    clean_logit_diff: float,
    corrupted_logit_diff: float,
    answer: str,
    distractor: str,
) -> go.Figure:
    """Recovered fraction of every head, layers × heads, on a diverging scale centred at 0.
    # recovered [L, H], logit_diff [L, H] (patched), kv_head [H]"""
    n_layers, n_heads = recovered.shape
    finite = np.abs(recovered[np.isfinite(recovered)])  # not where clean and corrupted tie
    limit = float(finite.max(initial=0)) or 1.0
    hover = np.stack([np.broadcast_to(kv_head, (n_layers, n_heads)), logit_diff], axis=-1).astype(
        np.float32
    )  # [L, H, 2]: kv head, patched logit difference
    heatmap = dict(
        type="heatmap",
        z=recovered.astype(np.float32),
        zmid=0.0,
        zmin=-limit,
        zmax=limit,
        colorscale=get_colorscale("RdBu"),
        colorbar=dict(title=dict(text="recovered"), thickness=12),
        customdata=hover,
        hovertemplate="layer %{y} · head %{x} · kv %{customdata[0]:d}<br>recovered %{z:.3g}"
        "<br>patched logit diff %{customdata[1]:.3g}<extra></extra>",
    )
    integers = dict(tickmode="linear", tick0=0, dtick=1, showgrid=False, zeroline=False)
    difference = f"{quoted_token(answer)} − {quoted_token(distractor)}"
    return figure(
        [heatmap],
        title="Each head patched from the clean run into the corrupted one: recovered = (patched − "
        f"corrupted) / (clean − corrupted)<br>logit {difference}: clean {clean_logit_diff:.3f}, "
        f"corrupted {corrupted_logit_diff:.3f}",
        xaxis=dict(title=dict(text="head"), **integers),
        yaxis=dict(title=dict(text="layer"), autorange="reversed", **integers),
        height=max(340, 160 + 22 * n_layers),
        margin=dict(t=80),
    )

"""Does the eager rerun reproduce the fast path? The viewed layer's max |eager − SDPA|, and the time of
each path."""

from __future__ import annotations

from explorer.figures.common import figure
from explorer.figures.plot import Plot, builds_figure


@builds_figure
def faithfulness_figure(
    layer: int,
    max_abs_diff: float,
    tolerance: float,
    tolerance_reason: str,
    forward_seconds: float,
    eager_seconds: float,
    n_layers: int,
) -> Plot:
    """Two bars (fast forward, eager rerun) in milliseconds; the layer's max |Δ| in the title, against
    the tolerance and what it comes from."""
    verdict = "within" if max_abs_diff <= tolerance else "OUTSIDE"
    millis = [forward_seconds * 1e3, eager_seconds * 1e3]
    bars = dict(
        type="bar",
        x=millis,
        y=[f"fast forward, SDPA (all {n_layers} layers)", f"eager rerun (layer {layer} alone)"],
        orientation="h",
        marker=dict(color=["#2563eb", "#d97706"]),
        text=[f"{m:.1f} ms" for m in millis],
        textposition="auto",
        hovertemplate="%{y}<br>%{x:.3g} ms<extra></extra>",
    )
    return figure(
        [bars],
        title=(
            f"Layer {layer}: max |eager − SDPA| of the attention output = {max_abs_diff:.2e},"
            f" {verdict} the tolerance {tolerance:.2e}<br><sup>the tolerance: {tolerance_reason}</sup>"
        ),
        xaxis=dict(title=dict(text="server time (ms)")),
        yaxis=dict(autorange="reversed"),
        height=250,
        margin=dict(l=260, t=70, b=50),
    )

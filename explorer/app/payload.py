"""What the app sends for a figure (Gradio's plot data: the figure's compact JSON and its export
settings), and the bytes of a layer switch's update."""

from __future__ import annotations

import json

import plotly.graph_objects as go

from explorer import figures
from explorer.engine.run import Run
from explorer.views.attention import head_figures, layer_figures
from explorer.views.rope import default_positions


def plot_payload(fig: go.Figure) -> dict[str, str]:
    """A figure as the app sends it to the browser (Gradio's plot data), with its export settings."""
    return {"type": "plotly", "plot": figures.to_json(fig, figures.export_config(fig), compact=True)}


def update_payload_bytes(run: Run, layer: int, head: int) -> int:
    """Bytes of the JSON one layer switch sends, figures as the app sends them: `head_figures`
    (pipeline, RoPE rotation and score split) and `layer_figures` (all heads, head similarity,
    faithfulness). A head switch sends the first three alone."""
    query, key = default_positions(run)
    update = head_figures(run, layer, head, query, key) + layer_figures(run, layer)
    return sum(len(json.dumps(plot_payload(fig), ensure_ascii=False).encode()) for fig in update)

"""Pure figure builders: numpy arrays and token strings in, `plotly.graph_objects.Figure` out.

No torch, no Gradio: each works in a notebook with `fig.show()`. Each builder's `.plot(...)` gives the
same figure as plain values (`Plot`), which the app sends without Plotly's validation.
"""

from explorer.figures.attention import (
    ZOOM_CELLS,
    PipelineParts,
    all_heads_figure,
    pipeline_figure,
    pipeline_parts,
    zoom_figure,
)
from explorer.figures.common import (
    export_config,
    json_text,
    sendable,
    sendable_traces,
    to_json,
    token_label,
)
from explorer.figures.faithfulness import faithfulness_figure
from explorer.figures.generation import candidates_figure, generation_figure
from explorer.figures.gqa import gqa_diagram_figure, head_similarity_figure, kv_cache_figure
from explorer.figures.interventions import ablation_next_tokens_figure, patching_figure
from explorer.figures.maps import KeyWrites, MapStyle
from explorer.figures.overview import next_tokens_figure, profile_figure
from explorer.figures.plot import FigureBuilder, Plot
from explorer.figures.rope import rope_angles_figure, rotation_figure, score_split_figure, wavelengths_figure

__all__ = [
    "ZOOM_CELLS",
    "FigureBuilder",
    "KeyWrites",
    "MapStyle",
    "PipelineParts",
    "Plot",
    "ablation_next_tokens_figure",
    "all_heads_figure",
    "candidates_figure",
    "export_config",
    "faithfulness_figure",
    "generation_figure",
    "gqa_diagram_figure",
    "head_similarity_figure",
    "json_text",
    "kv_cache_figure",
    "next_tokens_figure",
    "patching_figure",
    "pipeline_figure",
    "pipeline_parts",
    "profile_figure",
    "rope_angles_figure",
    "rotation_figure",
    "score_split_figure",
    "sendable",
    "sendable_traces",
    "to_json",
    "token_label",
    "wavelengths_figure",
    "zoom_figure",
]

"""The GQA tab: which query heads share which kv head, how alike their maps are, and the KV cache."""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr
from gradio.components.plot import PlotData


@dataclass(frozen=True, kw_only=True)
class GqaTab:
    tab: gr.Tab
    diagram: gr.Plot  # query head -> kv head (depends on the model alone)
    similarity: gr.Plot  # cosine of every pair of the layer's maps
    kv_cache: gr.Plot  # bytes of the cache against context, beside MHA and MQA (model alone)


def build(diagram: PlotData | None, kv_cache: PlotData | None) -> GqaTab:
    with gr.Tab("GQA", id="gqa", elem_id="tab-gqa") as tab:
        with gr.Row():
            diagram_plot = gr.Plot(diagram, show_label=False, elem_id="gqa-plot", elem_classes="wide-plot")
            similarity = gr.Plot(show_label=False, elem_id="similarity-plot", elem_classes="wide-plot")
        kv_plot = gr.Plot(kv_cache, show_label=False, elem_id="kv-cache-plot", elem_classes="wide-plot")
    return GqaTab(tab=tab, diagram=diagram_plot, similarity=similarity, kv_cache=kv_plot)

"""The GQA tab: which query heads share which kv head, how alike their maps are, and the KV cache."""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr
from gradio.components.plot import PlotData

from explorer.app.ui.plot_view import PlotView, figure_view


@dataclass(frozen=True, kw_only=True)
class GqaTab:
    tab: gr.Tab
    diagram: PlotView  # query head -> kv head (depends on the model alone)
    similarity: PlotView  # cosine of every pair of the layer's maps
    kv_cache: PlotView  # bytes of the cache against context, beside MHA and MQA (model alone)


def build(diagram: PlotData | None, kv_cache: PlotData | None) -> GqaTab:
    with gr.Tab("GQA", id="gqa", elem_id="tab-gqa") as tab:
        with gr.Row():
            diagram_plot = figure_view(diagram, elem_id="gqa-plot")
            similarity = figure_view(elem_id="similarity-plot")
        kv_plot = figure_view(kv_cache, elem_id="kv-cache-plot")
    return GqaTab(tab=tab, diagram=diagram_plot, similarity=similarity, kv_cache=kv_plot)

"""The Attention tab: one head stage by stage, and every head of the layer side by side."""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr


@dataclass(frozen=True)
class AttentionTab:
    tab: gr.Tab
    pipeline: gr.Plot  # Q·Kᵀ → ×1/√d → mask → masked → softmax of the chosen head
    all_heads: gr.Plot  # every head's softmax map, framed by kv group


def build() -> AttentionTab:
    with gr.Tab("Attention", elem_id="tab-attention") as tab:
        pipeline = gr.Plot(show_label=False, elem_id="pipeline-plot")
        all_heads = gr.Plot(show_label=False, elem_id="all-heads-plot")
    return AttentionTab(tab, pipeline, all_heads)

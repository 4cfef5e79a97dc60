"""The Faithfulness tab: the eager rerun of the layer against the fast path, and what each cost."""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr


@dataclass(frozen=True)
class FaithfulnessTab:
    tab: gr.Tab
    check: gr.Plot  # max |eager − SDPA| of the layer, and the time of each path


def build() -> FaithfulnessTab:
    with gr.Tab("Faithfulness", id="faithfulness", elem_id="tab-faithfulness") as tab:
        check = gr.Plot(show_label=False, elem_id="faithfulness-plot", elem_classes="wide-plot")
    return FaithfulnessTab(tab, check)

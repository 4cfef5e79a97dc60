"""The Faithfulness tab: the eager rerun of the layer against the fast path, and what each cost."""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from explorer.app.ui.plot_view import PlotView, figure_view


@dataclass(frozen=True)
class FaithfulnessTab:
    tab: gr.Tab
    check: PlotView  # max |eager − SDPA| of the layer, and the time of each path


def build() -> FaithfulnessTab:
    with gr.Tab("Faithfulness", id="faithfulness", elem_id="tab-faithfulness") as tab:
        check = figure_view(elem_id="faithfulness-plot")
    return FaithfulnessTab(tab, check)

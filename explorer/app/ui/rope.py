"""The RoPE tab: angles and wavelengths of the model, and one query and key turned pair by pair.
Moving the query or key position redraws the last two figures alone."""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from explorer import views
from explorer.app.ui import inputs as checked
from explorer.app.ui.common import Shared, gpu, guarded, index, plot
from explorer.app.ui.plot_view import PlotView, figure_view
from explorer.app.ui.wiring import named


@dataclass(frozen=True, kw_only=True)
class RopeTab:
    tab: gr.Tab
    angles: PlotView
    wavelengths: PlotView
    query: gr.Slider  # position m of the query turned in `rotation`
    key: gr.Slider  # position n of the key
    rotation: PlotView
    split: PlotView  # q·k split over the frequency pairs


def build(shared: Shared) -> RopeTab:
    with gr.Tab("RoPE", id="rope", elem_id="tab-rope") as tab:
        with gr.Row():
            angles = figure_view(elem_id="rope-angles-plot")
            wavelengths = figure_view(elem_id="rope-wavelengths-plot")
        with gr.Row():
            query = checked.PositionSlider(
                0, 1, value=0, step=1, label="Query position m", elem_id="rope-query"
            )
            key = checked.PositionSlider(0, 1, value=0, step=1, label="Key position n", elem_id="rope-key")
        rotation = figure_view(elem_id="rope-rotation-plot")
        split = figure_view(elem_id="rope-split-plot")

    @gpu
    @guarded(shared.status)
    def move_positions(layer, head, query, key, shown):
        if shown is None:
            return {}
        run = shared.workspace.run(*shown)
        layer, head = index(layer, "layer"), index(head, "head")
        query, key = index(query, "query position"), index(key, "key position")
        return {
            rotation: plot(views.rope_rotation(run, layer, head, query, key)),
            split: plot(views.rope_score_split(run, layer, head, query, key)),
        }

    gr.on(
        [query.input, key.input],
        *named(
            move_positions,
            {"layer": shared.layer, "head": shared.head, "query": query, "key": key, "shown": shared.shown},
        ),
        [shared.status, rotation, split],
        api_name="positions",
        trigger_mode="always_last",
    )
    return RopeTab(
        tab=tab, angles=angles, wavelengths=wavelengths, query=query, key=key, rotation=rotation, split=split
    )

"""The Attention tab: one head stage by stage, every head of the layer side by side, and a zoom
window showing exact values of any part of the head's maps (the full maps are pooled past 512 tokens)."""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from explorer import views
from explorer.ui.common import Shared, gpu, guarded, index, plot


@dataclass(frozen=True)
class AttentionTab:
    tab: gr.Tab
    pipeline: gr.Plot  # Q·Kᵀ → ×1/√d → mask → masked → softmax of the chosen head
    all_heads: gr.Plot  # every head's softmax map, framed by kv group
    window: tuple[gr.Number, gr.Number, gr.Number, gr.Number]  # first/last query, first/last key
    zoom: gr.Plot
    zoom_open: gr.State

    def refresh_zoom_after(self, shared: Shared, event, new_run: bool) -> None:
        """After `event` (a run, or a layer or head switch), redraw the zoom if it is open; a new run
        also moves the window to its default place."""

        @gpu
        @guarded(6)
        def refresh(layer, head, q0, q1, k0, k1, is_open, shown):
            if shown is None:
                return (gr.skip(),) * 6
            run = shared.workspace.run(*shown)
            window = views.default_zoom(run) if new_run else _window(q0, q1, k0, k1)
            layer, head = index(layer, "layer"), index(head, "head")
            figure = plot(views.zoom(run, layer, head, window)) if is_open else gr.skip()
            return gr.skip(), *(window if new_run else (gr.skip(),) * 4), figure

        inputs = [shared.layer, shared.head, *self.window, self.zoom_open, shared.shown]
        event.then(refresh, inputs, [shared.status, *self.window, self.zoom], api_name=False)


def _window(q0, q1, k0, k1) -> tuple[int, int, int, int]:
    """The window's four numbers as whole numbers (a cleared box counts as 0)."""
    names = ("first query", "last query", "first key", "last key")
    return tuple(index(value or 0, name) for value, name in zip((q0, q1, k0, k1), names, strict=True))


def build(shared: Shared) -> AttentionTab:
    with gr.Tab("Attention", elem_id="tab-attention") as tab:
        pipeline = gr.Plot(show_label=False, elem_id="pipeline-plot")
        all_heads = gr.Plot(show_label=False, elem_id="all-heads-plot")
        with gr.Accordion("Zoom: exact values of any window of this head's maps", open=False) as accordion:
            with gr.Row():
                window = (
                    gr.Number(0, label="first query", precision=0, minimum=0, elem_id="zoom-q0"),
                    gr.Number(0, label="last query", precision=0, minimum=0, elem_id="zoom-q1"),
                    gr.Number(0, label="first key", precision=0, minimum=0, elem_id="zoom-k0"),
                    gr.Number(0, label="last key", precision=0, minimum=0, elem_id="zoom-k1"),
                )
                show = gr.Button("Show window", elem_id="zoom-button", scale=0)
            zoom = gr.Plot(show_label=False, elem_id="zoom-plot")
    zoom_open = gr.State(False)

    @gpu
    @guarded(2)
    def show_window(layer, head, q0, q1, k0, k1, shown):
        if shown is None:
            return gr.skip(), gr.skip()
        run = shared.workspace.run(*shown)
        window = _window(q0, q1, k0, k1)
        return gr.skip(), plot(views.zoom(run, index(layer, "layer"), index(head, "head"), window))

    inputs = [shared.layer, shared.head, *window, shared.shown]
    gr.on(
        [show.click, accordion.expand, *(n.submit for n in window)],
        show_window,
        inputs,
        [shared.status, zoom],
        api_name="zoom",
    )
    accordion.expand(lambda: True, None, zoom_open, api_name=False)
    accordion.collapse(lambda: False, None, zoom_open, api_name=False)
    return AttentionTab(tab, pipeline, all_heads, window, zoom, zoom_open)

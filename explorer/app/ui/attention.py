"""The Attention tab: one head stage by stage, why a clicked cell scores as it does (`why`), every head
of the layer side by side, a zoom window showing exact values of any part of the head's maps (the full
maps are pooled past 512 tokens), how the softmax maps are drawn (log colours for faint attention;
weighted by what each key writes), and the layer's tensors or the head's map to download."""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from explorer import views
from explorer.app import markup
from explorer.app.ui import inputs as checked
from explorer.app.ui import why
from explorer.app.ui.common import (
    Follower,
    Shared,
    gpu,
    guarded,
    index,
    layer_view_value,
    plot,
)
from explorer.app.ui.layer_packs import LayerPacks
from explorer.app.ui.layer_view import layer_view
from explorer.app.ui.plot_view import PlotView, figure_view
from explorer.app.ui.wiring import named
from explorer.app.visitors import visitor
from explorer.engine.run import Run
from explorer.views import export


@dataclass(frozen=True, kw_only=True)
class AttentionTab:
    tab: gr.Tab
    pipeline: PlotView  # Q·Kᵀ → ×1/√d → mask → masked → softmax of the chosen head; every head's
    # softmax map as thumbnails, framed by kv group; every head drawn in the page
    window: tuple[gr.Number, gr.Number, gr.Number, gr.Number]  # first/last query, first/last key
    zoom: PlotView
    zoom_open: gr.State
    log_box: gr.Checkbox  # softmax maps on a log colour scale
    weighted_box: gr.Checkbox  # softmax maps weighted by what each key writes
    download: gr.DownloadButton  # hidden: the file asked for (a layer's tensors, a head's map), which the
    # page downloads at once (`DOWNLOAD_JS`), one click on the visible button
    why: why.WhyPanel  # a clicked cell's score split into its sources, under the pipeline

    def after_run(self, run: Run, layer: int, head: int, is_open: bool, style: views.MapStyle) -> dict:
        """A new run's updates of the zoom: its window moved to its default place, and drawn if open."""
        window = views.default_zoom(run)
        updates = dict(zip(self.window, window, strict=True))
        return updates | ({self.zoom: plot(views.zoom(run, layer, head, window, style))} if is_open else {})

    def follower(self, shared: Shared) -> Follower:
        """The zoom follows a layer or head switch when it is open, over the same window."""

        def follow(layer, head, window, is_open, shown, style):
            if not is_open or shown is None:
                return {}
            run = shared.workspace.run(*shown)
            return {self.zoom: plot(views.zoom(run, layer, head, _window(*window), style))}

        inputs = {
            "window": self.window,
            "is_open": self.zoom_open,
            "shown": shared.shown,
            "style": shared.map_style,
        }
        return Follower(inputs, [self.zoom], follow)

    def wire_style(self, shared: Shared, stale: list, packs: LayerPacks) -> None:
        """Either box redraws the softmax maps in the style they set (`shared.map_style`): the head's
        pipeline (its view remembered by `packs`), every head's map, and the zoom when open. What was
        offered for the view before (a file, a link: `stale`) goes."""

        @gpu
        @guarded(shared.status)
        def restyle(log, weighted, layer, head, shown, zoom_open, window):
            style = views.MapStyle(log=bool(log), weighted=bool(weighted))
            updates = {shared.map_style: style, **dict.fromkeys(stale, "")}
            if shown is None:
                return updates
            run, layer, head = shared.workspace.run(*shown), index(layer, "layer"), index(head, "head")
            if zoom_open:
                updates[self.zoom] = plot(views.zoom(run, layer, head, _window(*window), style))
            value = packs.remember(layer_view_value(run, layer, head, style), shown, style)
            return updates | {self.pipeline: value}

        inputs = {
            "log": self.log_box,
            "weighted": self.weighted_box,
            "layer": shared.layer,
            "head": shared.head,
        }
        inputs |= {"shown": shared.shown, "zoom_open": self.zoom_open, "window": self.window}
        outputs = [shared.status, shared.map_style, self.pipeline, self.zoom, *stale]
        boxes = [self.log_box.input, self.weighted_box.input]
        gr.on(boxes, *named(restyle, inputs), outputs, api_name=False)


# One click downloads: the file the handler wrote goes to the hidden download button, which the page
# clicks at once, then empties (so a refused export, which leaves it as it is, downloads nothing).
DOWNLOAD_JS = "() => { document.querySelector('#download-file')?.click(); return null; }"


def _window(q0, q1, k0, k1) -> tuple[int, int, int, int]:
    """The window's four numbers as whole numbers (a cleared box counts as 0)."""
    names = ("first query", "last query", "first key", "last key")
    return tuple(index(value or 0, name) for value, name in zip((q0, q1, k0, k1), names, strict=True))


def build(shared: Shared) -> AttentionTab:
    """The tab. Its layer view asks for what it lacks through its server function (`layer_packs`):
    the layer's other heads once it has drawn the shown one's, then, with its heads in and the page
    idle, the layers beside it, which it keeps and draws when the picker steps to one."""
    with gr.Tab("Attention", id="attention", elem_id="tab-attention") as tab:
        with gr.Row():  # side by side; on a phone one above the other
            with gr.Column(min_width=300):
                log_box = gr.Checkbox(
                    False,
                    label="Log colours for softmax maps (faint rows and sinks show; hover values stay exact)",
                    elem_id="log-colours",
                )
            with gr.Column(min_width=300):
                weighted_box = gr.Checkbox(
                    False,
                    label="Weight by what each key writes: ‖α·v·W_O‖, each row over its sum (hover: α too)",
                    elem_id="weighted-maps",
                )
        gr.HTML(
            f'<div class="figure-key">{markup.explained("hatched", "Hatched")} cells: keys after the query, '
            "which the causal mask hides.</div>",
            padding=False,
            elem_id="pipeline-key",
        )
        pipeline = layer_view(
            elem_id="pipeline-plot", thumbnails_elem_id="all-heads-plot", elem_classes="wide-plot"
        )
        why_panel = why.build()
        with gr.Accordion("Zoom: exact values of any window of this head's maps", open=False) as accordion:
            with gr.Row():
                window = (
                    checked.Number(0, label="first query", precision=0, minimum=0, elem_id="zoom-q0"),
                    checked.Number(0, label="last query", precision=0, minimum=0, elem_id="zoom-q1"),
                    checked.Number(0, label="first key", precision=0, minimum=0, elem_id="zoom-k0"),
                    checked.Number(0, label="last key", precision=0, minimum=0, elem_id="zoom-k1"),
                )
                show = gr.Button("Show window", elem_id="zoom-button", scale=0)
            zoom = figure_view(elem_id="zoom-plot")
        with gr.Row():
            npz_button = gr.Button("Layer tensors (.npz)", size="sm", elem_id="download-npz")
            csv_button = gr.Button("This head's map (.csv)", size="sm", elem_id="download-csv")
            download = gr.DownloadButton(elem_id="download-file", elem_classes="hidden-input")
        zoom_open = gr.State(False)  # inside the tab: a State among gr.Tabs' children would count as a tab

    @gpu
    @guarded(shared.status)
    def show_window(layer, head, q0, q1, k0, k1, shown, style):
        if shown is None:
            return {}
        run = shared.workspace.run(*shown)
        window = _window(q0, q1, k0, k1)
        return {zoom: plot(views.zoom(run, index(layer, "layer"), index(head, "head"), window, style))}

    picked = {"layer": shared.layer, "head": shared.head}
    inputs = {**picked, **dict(zip(("q0", "q1", "k0", "k1"), window, strict=True))}
    gr.on(
        [show.click, accordion.expand, *(n.submit for n in window)],
        *named(show_window, inputs | {"shown": shared.shown, "style": shared.map_style}),
        [shared.status, zoom],
        api_name="zoom",
    )
    accordion.expand(lambda: True, None, zoom_open, api_name=False, queue=False)
    accordion.collapse(lambda: False, None, zoom_open, api_name=False, queue=False)

    policy, downloads = shared.workspace.policy, shared.downloads

    @guarded(shared.status)
    def layer_npz(layer, shown, request: gr.Request):
        if shown is None:
            return {}
        run, layer = shared.workspace.run(*shown), index(layer, "layer")
        if not views.maps_fit(run):
            raise ValueError(
                f"This app exports a layer's tensors up to {views.VIEW_MAP_BYTES >> 20} MiB of maps; "
                f"{run.n_tokens:,} tokens on this model pass it. Use a shorter prompt, or the Python API."
            )
        size, what = export.layer_bytes(run), f"Layer {layer}'s tensors for {run.n_tokens:,} tokens"
        path = downloads.path(visitor(request, policy.proxies), f"layer{layer}.npz", size, what)
        return {download: str(export.write_layer_npz(run, layer, path))}

    @guarded(shared.status)
    def head_csv(layer, head, shown, request: gr.Request):
        if shown is None:
            return {}
        run, layer, head = shared.workspace.run(*shown), index(layer, "layer"), index(head, "head")
        name = f"layer{layer}-head{head}-softmax.csv"
        size, what = export.head_csv_bytes(run), f"Head {head}'s map for {run.n_tokens:,} tokens"
        path = downloads.path(visitor(request, policy.proxies), name, size, what)
        return {download: str(export.write_head_csv(run, layer, head, path, views.VIEW_MAP_BYTES))}

    npz = named(layer_npz, {"layer": shared.layer, "shown": shared.shown})
    npz_button.click(*npz, [shared.status, download], api_name="npz").then(
        None, None, download, js=DOWNLOAD_JS, api_name=False
    )
    csv = named(head_csv, {**picked, "shown": shared.shown})
    csv_button.click(*csv, [shared.status, download], api_name="csv").then(
        None, None, download, js=DOWNLOAD_JS, api_name=False
    )
    why_panel.wire(shared, pipeline)
    return AttentionTab(
        tab=tab,
        pipeline=pipeline,
        window=window,
        zoom=zoom,
        zoom_open=zoom_open,
        log_box=log_box,
        weighted_box=weighted_box,
        download=download,
        why=why_panel,
    )

"""The page's plots: a Gradio custom component that owns its drawing (its source under
components/plot_view; built into ./templates, committed, so the app needs no node).

One component, two kinds, so the page loads its Plotly once:
- "figure" (`figure_view`), where Gradio's plot would be: its value is a figure as the app sends it
  (`payload.plot_payload`, or a `Plot` or `go.Figure`, sent the same way), drawn in place with the
  page's decoder.
- "layer" (`explorer.app.ui.layer_view`), the Attention tab's pipeline and every head's thumbnails: its
  value is a layer's pack, and its events are the layer view's.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any, ClassVar

import plotly.graph_objects as go
from gradio.components import base  # not its Component by name: the build takes every class here for one
from gradio.components import plot as gradio_plot
from gradio.components.base import server
from gradio.events import EventListener

from explorer.app import payload
from explorer.figures import Plot

# What answers each layer view's `layer_pack`, by the view's `pack_server` name (weakly: a page built
# and dropped, as tests do, takes its workspace with it).
PACK_SERVERS: weakref.WeakValueDictionary[str, Callable] = weakref.WeakValueDictionary()


class PlotView(base.Component):
    """A plot the page draws itself: one figure (`kind="figure"`), or a layer's pipeline and thumbnails
    (`kind="layer"`). The layer's events (explorer/app/ui/layer_view.py): `select_cell` (a cell of the
    head's maps clicked: `CellData`), `head_shown` (it drew another head of its layer: the head picker
    follows, in the page),
    `follow` (the views that follow the head are due, asked by the page script: `FollowData`),
    `head_picked` (a head of another layer picked in the page: `HeadData`), `cell_asked` (a cell the
    page asks to split: `CellAskedData`). What the layer view lacks it asks for through its server
    function `layer_pack` (explorer/app/ui/layer_packs.py), answered by what `serve_packs` was given.
    A figure's clicks go to the page script ("plot-click")."""

    # Built from components/plot_view/frontend into ./templates (components/plot_view/README.md).
    FRONTEND_DIR = "../../../components/plot_view/frontend/"
    EVENTS: ClassVar[list] = [
        EventListener("select_cell", doc="A cell of the head's maps clicked: {query, key}."),
        EventListener("head_shown", doc="The view drew another head of its layer: {layer, head}."),
        EventListener(
            "follow", doc="The views that follow the head are due: {layer, head, drawn, layer_changed}."
        ),
        EventListener("head_picked", doc="A head of another layer picked in the page: {layer, head}."),
        EventListener(
            "cell_asked", doc="A cell the page asks to split: {layer, head, query, key} (null: last, top)."
        ),
    ]

    def __init__(
        self,
        value: Any = None,
        *,
        kind: str = "figure",
        elem_id: str | None = None,
        elem_classes: list[str] | str | None = None,
        thumbnails_elem_id: str | None = None,
        pack_server: str | None = None,
        scale: int | None = None,
        visible: bool = True,
        render: bool = True,
    ):
        # Each parameter named here reaches the page: Gradio sends a component the arguments its
        # __init__ declares. `elem_id` names the (pipeline's) card, `thumbnails_elem_id` the thumbnails';
        # `pack_server` names what answers the layer view's `layer_pack` (`serve_packs`).
        if kind not in ("figure", "layer"):
            raise ValueError(f"kind must be 'figure' or 'layer', not {kind!r}")
        self.kind = kind
        self.thumbnails_elem_id = thumbnails_elem_id
        self.pack_server = pack_server
        super().__init__(
            value=value,
            elem_id=elem_id,
            elem_classes=elem_classes,
            scale=scale,
            visible=visible,
            render=render,
        )

    def serve_packs(self, answer: Callable[[Any], dict]) -> None:
        """Answer the layer view's `layer_pack` calls with `answer(asked)`, a function its caller keeps
        alive (held here weakly, by the view's `pack_server`: a session's update of the view's props
        makes Gradio build another instance from the same arguments, which finds it by that name)."""
        if self.pack_server is None:
            raise ValueError("a plot serves packs once given its pack_server name")
        PACK_SERVERS[self.pack_server] = answer

    def packs_served(self) -> Callable[[Any], dict] | None:
        """What answers the view's `layer_pack` (None: nothing, or what did has gone)."""
        return PACK_SERVERS.get(self.pack_server) if self.pack_server else None

    @server
    def layer_pack(self, asked: Any) -> dict:
        """What the layer view lacks, asked by the page (`explorer.app.ui.layer_packs`)."""
        answer = self.packs_served() if self.kind == "layer" else None
        return {"error": "This plot answers no packs."} if answer is None else answer(asked)

    def preprocess(self, payload: Any) -> Any:
        return payload

    def postprocess(self, value: Any) -> Any:
        """A figure as the app sends it: a `Plot` or `go.Figure` sent as `payload.plot_payload` sends
        one, and Gradio's plot data as its plain dict; a layer's value as it is."""
        if isinstance(value, Plot | go.Figure):
            return payload.plot_payload(value)
        if isinstance(value, gradio_plot.PlotData):
            return value.model_dump()
        return value

    def api_info(self) -> dict[str, Any]:
        return {
            "type": "object",
            "description": "a figure as Gradio's plot sends one: {type: 'plotly', plot: figure JSON}; "
            "the layer view's also names its layer and head",
        }

    def example_payload(self) -> Any:
        return None

    def example_value(self) -> Any:
        return None


def figure_view(
    value: Any = None, *, elem_id: str, elem_classes: str = "wide-plot", scale: int | None = None
) -> PlotView:
    """A figure of the page (a `Plot`, a `go.Figure` or `payload.plot_payload`'s data), in the card
    `elem_id`."""
    return PlotView(value, kind="figure", elem_id=elem_id, elem_classes=elem_classes, scale=scale)

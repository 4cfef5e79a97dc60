"""The Attention tab's layer view: the page's plot component (`plot_view.PlotView`) of kind "layer",
what it is sent and what its events carry.

Its value is a layer's pack: the shown head's pipeline as sent (`payload.pipeline_payload`'s figure,
marked with what the other heads are asked by, or carrying every other head's as what differs from
it), with the layer and head it shows, every head's thumbnails and the view it belongs to (run and map
style). It draws with its own Plotly into two plots, updated in place, and switches heads from the
pack, and layers from the packs it keeps, with no request. What it lacks (a layer, a layer's other
heads, the layers beside the one drawn) it asks for through its one server function, `layer_pack`
(`explorer.app.ui.layer_packs`).
"""

from __future__ import annotations

import uuid
from typing import Any

import gradio as gr

from explorer.app.ui import toasts
from explorer.app.ui.inputs import LARGEST
from explorer.app.ui.plot_view import PlotView
from explorer.engine.config import brief


def layer_view(*, elem_id: str, thumbnails_elem_id: str, elem_classes: str = "wide-plot") -> PlotView:
    """The layer view: the pipeline in the card `elem_id`, every head's thumbnails in `thumbnails_elem_id`."""
    return PlotView(
        kind="layer",
        elem_id=elem_id,
        thumbnails_elem_id=thumbnails_elem_id,
        pack_server=f"{elem_id}-{uuid.uuid4().hex}",  # one page's: tests build several in one process
        elem_classes=elem_classes,
    )


def layer_value(
    plot_data: dict, *, layer: int, head: int, n_layers: int, view: str, thumbnails: str | None = None
) -> dict:
    """The view's value for a layer: the pipeline payload (`payload.pipeline_payload`: Gradio's plot
    data, which API callers read as any plot's), the layer and head it shows, the model's number of
    layers, the view it belongs to (`payload.view_key`: the layers the view keeps are of one run drawn
    in one style), and every head's thumbnails (a figure's JSON text, `views.all_heads`), left out where
    they stay as they are (another head of the layer on screen)."""
    value = {**plot_data, "layer": layer, "head": head, "n_layers": n_layers, "view": view}
    return value | ({"thumbnails": thumbnails} if thumbnails is not None else {})


# The pickers' scripts: the layer or head picked is the view's to draw (it asks the server where it
# does not keep the layer or hold the head); the view's old link goes.
SHOW_LAYER_JS = """(layer, head) => {
  const detail = { layer: Number(layer), head: Number(head) };
  document.querySelector('#pipeline-plot')?.dispatchEvent(new CustomEvent('show-layer', { detail }));
  return '';
}"""
# The head the view drew itself, for the head picker (and the view's old link goes): no request.
SHOWN_HEAD_JS = """() => [Number(document.querySelector('#pipeline-plot')?.dataset.head || 0), '']"""
SHOW_HEAD_JS = """(head) => {
  const detail = { head: Number(head) };
  document.querySelector('#pipeline-plot')?.dispatchEvent(new CustomEvent('show-head', { detail }));
  return '';
}"""


# What an event carries is read as strictly as a control's value (`inputs`): each field's type, a
# whole number within what a control could hold, a list no longer than the page sends. A field that
# fails is refused before the handler runs, named, as a toast; each handler then checks the numbers
# against the run's model (`common.picked_head`, `payload.asked_heads`). Nothing an event carries is
# sent back unchecked: a number past 64 bits could not be written into the answer at all.
MOST_NEIGHBOURS = 2  # the layers beside one: the one before and the one after


def layers_beside(data: dict) -> list[int]:
    """Field `layers`: at most the two layers beside one, each a whole number."""
    layers = data.get("layers")
    if not isinstance(layers, list) or len(layers) > MOST_NEIGHBOURS:
        said = f"a list of {len(layers):,}" if isinstance(layers, list) else told(layers)
        raise toasts.error(f"The pack's layers takes a list of at most two layers, got {said}.")
    return [_whole_number(layer, "layers") for layer in layers]


def told(value) -> str:
    """A field's value as a refusal quotes it: a number or text briefly, anything else by its kind."""
    if value is None or isinstance(value, bool | int | float | str):
        return brief(value)
    return "an object" if isinstance(value, dict) else f"a {type(value).__name__}"


def fields_of(data) -> dict:
    """The event's data as its fields; an API call sends none (every field then absent)."""
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise toasts.error(f"An event's data is an object of named fields, got {told(data)}.")
    return data


def whole(data: dict, name: str, *, optional: bool = False) -> int | None:
    """Field `name` as a whole number (None where it may be absent or null)."""
    value = data.get(name)
    return None if value is None and optional else _whole_number(value, name)


def _whole_number(value, name: str) -> int:
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if not number or not abs(value) <= LARGEST or value != int(value):  # (NaN fails the comparison)
        raise toasts.error(f"The event's {name} takes a whole number, got {told(value)}.")
    return int(value)


def _flag(data: dict, name: str) -> bool:
    """Field `name` as true or false (false where absent)."""
    value = data.get(name, False)
    if not isinstance(value, bool):
        raise toasts.error(f"The event's {name} takes true or false, got {told(value)}.")
    return value


class CellData(gr.EventData):
    """A clicked cell of the head's maps: its query and key positions."""

    def __init__(self, target, data: Any):
        super().__init__(target, data)
        data = fields_of(data)
        self.query, self.key = whole(data, "query"), whole(data, "key")


class HeadData(gr.EventData):
    """A head picked in the page (`head_picked`): its layer and head; both None from an API call, which
    sends no event data (the handler then reads the pickers)."""

    def __init__(self, target, data: Any):
        super().__init__(target, data)
        data = fields_of(data)
        self.layer = whole(data, "layer", optional=True)
        self.head = whole(data, "head", optional=self.layer is None)

    def override(self, layer, head) -> tuple:
        """The event's layer and head, or those given where it sent none (an API call)."""
        return (layer, head) if self.layer is None else (self.layer, self.head)


class FollowData(HeadData):
    """What the views that follow a head are asked for by (`follow`): the layer and head, whether the
    view drew the head's pipeline itself (`drawn`), and whether the layer changed in the page
    (`layer_changed`: the layer's own views follow too). An API call sends none: the pickers' layer and
    head, the pipeline drawn by the server, the layer's views left as they are."""

    def __init__(self, target, data: Any):
        super().__init__(target, data)
        data = fields_of(data)
        self.drawn, self.layer_changed = _flag(data, "drawn"), _flag(data, "layer_changed")


class CellAskedData(HeadData):
    """A cell the page asks to split (`cell_asked`): its layer, head, query and key, the query None for
    the last position and the key None for the one the head looks at most there."""

    def __init__(self, target, data: Any):
        super().__init__(target, data)
        data = fields_of(data)
        self.query, self.key = whole(data, "query", optional=True), whole(data, "key", optional=True)

"""The Attention tab's layer view: a Gradio custom component that owns its drawing (its source under
components/layer_view; built into ./templates, committed, so the app needs no node).

Its value is a layer's pack: the shown head's pipeline as sent (`payload.pipeline_payload`'s figure,
carrying every other head's as what differs from it), with the layer and head it shows and every
head's thumbnails; or, for a long prompt, the answer to its `ask_others` event (the other heads, joined
to the pack on screen), or to its `prepare` event (the neighbouring layers the server made ready). It
draws with its own Plotly into two plots, updated in place, and switches heads from the pack with no
request (picked in the head picker, or a thumbnail clicked).
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

import gradio as gr
from gradio.components import base  # not its Component by name: the build takes every class here for one
from gradio.events import EventListener


class LayerView(base.Component):
    """A layer's pipeline view. Events: `select_cell` (a cell of the head's maps clicked: `CellData`),
    `ask_others` (a long prompt's layer drawn: `AskData`, answered with `others_value`), `prepare` (a
    layer whose value said `prepare` drawn, its heads in and the page idle: `PrepareData`, answered
    with `prepared_value`)."""

    # Built from components/layer_view/frontend into ./templates (components/layer_view/README.md).
    FRONTEND_DIR = "../../../components/layer_view/frontend/"
    EVENTS: ClassVar[list] = [
        EventListener("select_cell", doc="A cell of the head's maps clicked: {query, key}."),
        EventListener("ask_others", doc="A long prompt's layer drawn: {ask: 'layer,head,fingerprint'}."),
        EventListener("prepare", doc="A layer drawn, the page idle: {layer}, its neighbours to make ready."),
    ]

    def __init__(
        self,
        value: Any = None,
        *,
        elem_id: str | None = None,
        elem_classes: list[str] | str | None = None,
        thumbnails_elem_id: str | None = None,
        visible: bool = True,
        render: bool = True,
    ):
        # Each parameter named here reaches the page: Gradio sends a component the arguments its
        # __init__ declares. `elem_id` names the pipeline's card, `thumbnails_elem_id` the thumbnails'.
        self.thumbnails_elem_id = thumbnails_elem_id
        super().__init__(
            value=value, elem_id=elem_id, elem_classes=elem_classes, visible=visible, render=render
        )

    def preprocess(self, payload: Any) -> Any:
        return payload

    def postprocess(self, value: Any) -> Any:
        return value

    def api_info(self) -> dict[str, Any]:
        return {"type": "object", "description": "a layer's pipeline: {plot: figure JSON, layer, head}"}

    def example_payload(self) -> Any:
        return None

    def example_value(self) -> Any:
        return None


def layer_value(
    plot_data: dict, layer: int, head: int, thumbnails: str | None = None, prepare: bool = False
) -> dict:
    """The view's value for a layer: the pipeline payload (`payload.pipeline_payload`: Gradio's plot
    data, which API callers read as any plot's), the layer and head it shows, and every head's
    thumbnails (a figure's JSON text, `views.all_heads`), left out where they stay as they are (another
    head of the layer on screen). `prepare`: once drawn and idle, the view asks the server to make the
    neighbouring layers ready (`views.prepare_layer`)."""
    value = {**plot_data, "layer": layer, "head": head}
    value |= {"thumbnails": thumbnails} if thumbnails is not None else {}
    return value | ({"prepare": True} if prepare else {})


def others_value(answer: str | None) -> dict:
    """The view's value answering its `ask_others` (`payload.other_heads`' JSON text; None where the
    layer it asked for is no longer on screen: the view stops asking)."""
    return {"answer": None if answer is None else json.loads(answer)}


def prepared_value(layer: int, prepared: list[int]) -> dict:
    """The view's value answering its `prepare` for `layer`: the neighbouring layers now ready."""
    return {"prepared": prepared, "around": layer}


class CellData(gr.EventData):
    """A clicked cell of the head's maps: its query and key positions."""

    def __init__(self, target, data: Any):
        super().__init__(target, data)
        self.query, self.key = int(data["query"]), int(data["key"])


class AskData(gr.EventData):
    """What a drawn layer asks its other heads by: "layer,head,fingerprint"."""

    def __init__(self, target, data: Any):
        super().__init__(target, data)
        self.ask = str(data["ask"])


class PrepareData(gr.EventData):
    """The layer a drawn view asks the server to prepare the neighbours of."""

    def __init__(self, target, data: Any):
        super().__init__(target, data)
        self.layer = int(data["layer"])

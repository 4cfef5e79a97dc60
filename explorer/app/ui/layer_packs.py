"""The layer view's one channel to the server: its server function `layer_pack` (Gradio's component
server functions, as its FileExplorer's `ls`), which answers what the view lacks of the view on screen.
What the view keeps, and when it asks, is the page's (components/plot_view/frontend/pack.mjs and
LayerView.svelte); what it is sent is `payload`'s wire format.

Asked ({view, part, layer, head, ...}: `PackAsked`), by its part:
- "layer": a layer the view does not keep, head `head` shown: its pack (`common.layer_view_value`:
  the head's pipeline, marked with what the others are asked by, and every head's thumbnails);
- "heads": the other heads of the pack on screen, by its mark `others` ("layer,head,fingerprint":
  `payload.other_heads`), answered {answer: {others, heads} or None where the mark is stale};
- "beside": the `layers` beside layer `layer` (at most two) for the view to keep, while the workspace
  still holds the run (never a forward for them): {around, neighbours: [their packs]}.

The view is named by its packs' `view` (`payload.view_key`), which the handlers that send a pack
remember with the run and style it shows (`LayerPacks.remember`); a view no longer remembered, or whose
run's model is gone, is answered with an error.

The gates every event passes hold on it too:
- the fair queue: the middleware admits each call as it admits a join, as a function of its own
  (`queue_middleware.FairQueue`, the kind COMPONENT_KIND);
- turns: at most `policy.concurrency` packs computed at once, as the queue runs one function's events;
- the deadline: the policy's bound on a request (`limits.bounded`);
- the byte budget: runs come from the workspace (kept within its budget), a pack's other heads only
  while they fit `payload.OTHER_HEADS_BYTES` (`payload.others_follow`), the layers beside one only while
  they fit `payload.NEIGHBOUR_BYTES`;
- what it is asked is read as strictly as an event's data (`layer_view`'s fields), every number then
  checked against the run's model.
An error is answered as {"error": message}: the view shows it as a warning, and the app stays up.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import gradio as gr

from explorer import views
from explorer.app import markup, payload
from explorer.app.limits import bounded
from explorer.app.ui import layer_view
from explorer.app.ui.common import layer_view_value, neighbour_values, picked_head, pipeline_names, warn
from explorer.app.ui.plot_view import PlotView
from explorer.app.workspace import Workspace

PARTS = ("layer", "heads", "beside")
VIEWS_REMEMBERED = 512  # views the server answers for: each a few hundred bytes, the oldest forgotten
VIEW_CHARS = 64  # a view's key as `payload.view_key` writes it is 24 hex digits
ASK_CHARS = 80  # a pack's mark for its other heads ("layer,head,fingerprint")


@dataclass(frozen=True)
class PackAsked:
    """What the view asks `layer_pack` for (its fields as the module says)."""

    view: str
    part: str
    layer: int
    head: int
    others: str = ""  # "heads": the mark of the pack on screen
    layers: tuple[int, ...] = ()  # "beside": the layers to send

    @classmethod
    def read(cls, data: Any) -> PackAsked:
        """The ask as its fields, each refused by name (ValueError) where it is not what the page sends."""
        fields = layer_view.fields_of(data)
        view, part = fields.get("view"), fields.get("part")
        if not isinstance(view, str) or not 0 < len(view) <= VIEW_CHARS:
            raise ValueError(f"The pack's view takes the key of a view, got {layer_view.told(view)}.")
        if part not in PARTS:
            raise ValueError(f"The pack's part takes one of {', '.join(PARTS)}, got {layer_view.told(part)}.")
        layer, head = layer_view.whole(fields, "layer"), layer_view.whole(fields, "head")
        others = fields.get("others", "")
        if part == "heads" and (not isinstance(others, str) or not 0 < len(others) <= ASK_CHARS):
            said = layer_view.told(others)
            raise ValueError(f"The pack's others takes its mark of the other heads, got {said}.")
        layers = layer_view.layers_beside(fields) if part == "beside" else ()
        return cls(view, part, layer, head, others if part == "heads" else "", tuple(layers))


@dataclass(frozen=True)
class ViewShown:
    """What a view shows: the run (`Shared.shown`: the arguments of `workspace.run`) and its style."""

    shown: tuple
    style: views.MapStyle


class LayerPacks:
    """The server side of `layer_pack`: the views remembered, the turns, and the answers."""

    def __init__(self, workspace: Workspace):
        self.workspace = workspace
        policy = workspace.policy
        self._turns = threading.BoundedSemaphore(max(1, policy.concurrency))
        self._views: OrderedDict[str, ViewShown] = OrderedDict()
        self._lock = threading.Lock()
        self._answer = bounded(self._answered, policy.request_seconds)
        self._served = self.answer  # what the view calls (held weakly there), alive while this is

    def remember(self, value: dict | None, shown, style: views.MapStyle) -> dict | None:
        """A layer view's value as sent (`common.pipeline_plot`), its view remembered for what the page
        asks of it next."""
        if value and shown is not None and "view" in value:
            with self._lock:
                self._views[value["view"]] = ViewShown(tuple(shown), style)
                self._views.move_to_end(value["view"])
                while len(self._views) > VIEWS_REMEMBERED:
                    self._views.popitem(last=False)
        return value

    def answer(self, data: Any) -> dict:
        """`layer_pack`'s answer to `data`, or {"error": message} (escaped: the page shows it as is)."""
        try:
            with self._turns:
                return self._answer(PackAsked.read(data))
        except gr.Error as refused:  # a field refused as an event's would be: its message escaped already
            return {"error": str(refused.message)}
        except Exception as error:
            return {"error": markup.toast(warn(error, "layer_pack", toast=False))}

    def _answered(self, asked: PackAsked) -> dict:
        with self._lock:
            view = self._views.get(asked.view)
        if view is None:
            raise ValueError("This view is no longer on the server: press Run to draw it again.")
        if asked.part == "beside":
            run = self.workspace.held_run(*view.shown)  # never a forward for layers not asked for yet
            if run is None:
                return {"around": asked.layer, "neighbours": []}
            layer, head = picked_head(run, asked.layer, asked.head)
            n_layers = run.config.n_layers
            for beside in asked.layers:
                if not 0 <= beside < n_layers:
                    raise ValueError(f"There is no layer {beside:,} in this model ({n_layers} layers).")
            budget = payload.NEIGHBOUR_BYTES
            values = neighbour_values(run, layer, head, list(asked.layers), view.style, budget)
            return {"around": layer, "neighbours": values}
        run = self.workspace.run(*view.shown)
        if asked.part == "heads":
            layer, head, fingerprint = payload.asked_heads(run, asked.others)
            names = pipeline_names(run, layer)
            return {"answer": payload.other_heads(run, layer, head, fingerprint, view.style, names)}
        layer, head = picked_head(run, asked.layer, asked.head)
        return layer_view_value(run, layer, head, view.style)

    def serve(self, view: PlotView) -> None:
        """Answer the layer view's `layer_pack` calls."""
        view.serve_packs(self._served)

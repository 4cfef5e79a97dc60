"""The Overview's composition card: how much each head reads what an earlier head writes (K-, Q- and
V-composition from the weights alone, `views.composition`), drawn when the card is opened (endpoint
`/composition`), the head on screen framed. A click on a cell opens its later head (page.js)."""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from explorer import views
from explorer.app import limits
from explorer.app.ui.common import COSTLY, Shared, gpu, guarded, index, plot
from explorer.app.ui.plot_view import PlotView, figure_view
from explorer.app.ui.wiring import named

HINT = (
    "Rows: earlier heads; columns: later heads, in layer order. K: the later head's keys read what the "
    "earlier one wrote (an induction head reading a previous-token head); Q: its queries do; V: its "
    "values do. Weights only: ‖W_QK·W_OV‖ over the two norms, the norms' weights folded in. Click a cell "
    "to open its later head."
)


@dataclass(frozen=True, kw_only=True)
class CompositionCard:
    panel: gr.Accordion
    plot: PlotView

    def wire(self, shared: Shared) -> None:
        @gpu
        @guarded(shared.status)
        def draw(request: gr.Request, layer, head, shown):
            if shown is None:
                return {}
            run = shared.workspace.run(*shown)
            picked = index(layer, "layer"), index(head, "head")
            with shared.readings.reading(request, limits.composition_cost(run.explorer), run):
                figure = views.composition(run.explorer, picked)
            return {self.plot: plot(figure, "composition")}

        inputs = {"layer": shared.layer, "head": shared.head, "shown": shared.shown}
        self.panel.expand(*named(draw, inputs), [shared.status, self.plot], api_name="composition", **COSTLY)


def build() -> CompositionCard:
    with gr.Accordion(
        "Composition: which heads read which heads' writes", open=False, elem_id="composition"
    ) as panel:
        gr.Markdown(HINT)
        figure = figure_view(elem_id="composition-plot")
    return CompositionCard(panel=panel, plot=figure)

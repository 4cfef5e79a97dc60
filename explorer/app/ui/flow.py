"""The Flow tab: what actually moved to one position's output, as a graph of routes through the layers
(Ferrando & Voita 2024, as the LLM Transparency Tool builds it), with attention rollout beside it to show
why weights alone mislead. Drawn when the tab opens (endpoint `/flow`, at the last position) and after a
run while it is open; a new threshold or position redraws it (`/flow_at`). A click on an attention edge
opens its layer and top head."""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from explorer import views
from explorer.app import limits, markup
from explorer.app.ui import inputs as checked
from explorer.app.ui.common import (
    COSTLY,
    AfterRuns,
    Shared,
    close_when,
    draw_while_open,
    gpu,
    guarded,
    index,
    plot,
    top,
)
from explorer.app.ui.plot_view import PlotView, figure_view
from explorer.app.ui.wiring import named

ABOUT = (
    "What reaches the output at one position, and by which route: every part a block adds to the stream "
    "(each head's share from each key, the MLP, the residual) weighed by how much it moves the stream "
    "toward what it becomes, routes under the threshold dropped (Ferrando & Voita 2024, *Information flow "
    "routes*). Each edge is as wide as the share of the output it carries; the strongest attention routes "
    "are named by their head (23.4: layer 23, head 4). Hover an edge for its weight and heads; click an "
    "attention edge to open its top head. "
    "The threshold drops each head's share before the heads are summed, as the LLM Transparency Tool "
    "does: a route spread thinly over several heads shows only at a lower threshold."
)
NOT_PATCHING = (
    "**What flow measures, and why patching can differ.** Flow weighs what each part *writes* into the "
    "stream on this one prompt: how large its write is and how far it moves the stream toward the output. "
    "Patching (the Intervene tab) measures an *effect on the answer*: a head's output taken from another "
    "prompt, and how much logit(answer) − logit(distractor) changes. A head can write a lot that the "
    "answer does not turn on, and a small write can decide it, so the routes named here need not be the "
    "heads patching ranks first: on SmolLM2's indirect-object prompt the strongest routes run through "
    "23.0 and 23.4, while patching ranks 23.3 first."
)
ROLLOUT_NOTE = (
    "**Attention rollout** (Abnar & Zuidema 2020), below in light blue, multiplies every layer's "
    "head-averaged weights with half the stream assumed kept. It never looks at what a key writes "
    "(‖v·W_O‖) or at the MLPs, so tokens that draw weight but write little, like the first token (a sink), "
    "stand out. In dark blue, the graph's own answer: each token's share of the output along the routes "
    "above, which measure what each part actually adds."
)


@dataclass(frozen=True, kw_only=True)
class FlowTab:
    tab: gr.Tab
    is_open: gr.State
    threshold: gr.Slider
    position: gr.Slider
    graph: PlotView
    rollout: PlotView

    def close_when(self, tabs: list[gr.Tab]) -> None:
        close_when(self.is_open, tabs)

    def wire(self, shared: Shared, after_runs: AfterRuns) -> None:
        """Open, or a run while open: the last position; a threshold or position: that one."""
        opened = [shared.status, self.is_open, self.position, self.graph, self.rollout]

        def flow(request: gr.Request, run, position: int, threshold: float) -> dict:
            """The graph and rollout, drawn within the server's limits, and what the status says of them."""
            threshold, note = limits.flow_threshold(threshold, run.n_tokens, shared.workspace.policy)
            with shared.readings.reading(request, limits.flow_cost(run, threshold), run):
                graph, rollout = views.flow(run, position, threshold)
            drawn = {self.graph: plot(graph, "flow"), self.rollout: plot(rollout, "rollout")}
            return drawn | ({shared.status: markup.status(note, "warning")} if note else {})

        @gpu
        @guarded(shared.status)
        def open_flow(request: gr.Request, shown, threshold):
            if shown is None:
                return {self.is_open: True}
            run = shared.workspace.run(*shown)
            last = run.n_tokens - 1
            drawn = flow(request, run, last, threshold)
            return drawn | {
                self.is_open: True,
                self.position: gr.update(maximum=top(run.n_tokens), value=last),
            }

        draw_while_open(
            self.tab,
            self.is_open,
            open_flow,
            {"shown": shared.shown, "threshold": self.threshold},
            opened,
            after_runs,
            api_name="flow",
        )

        @gpu
        @guarded(shared.status)
        def redraw(request: gr.Request, shown, threshold, position):
            if shown is None:
                return {}
            return flow(request, shared.workspace.run(*shown), index(position, "position"), threshold)

        gr.on(
            [self.threshold.release, self.position.release],
            *named(redraw, {"shown": shared.shown, "threshold": self.threshold, "position": self.position}),
            [shared.status, self.graph, self.rollout],
            api_name="flow_at",
            **COSTLY,
        )


def build() -> FlowTab:
    with gr.Tab("Flow", id="flow", elem_id="tab-flow") as tab:
        is_open = gr.State(False)  # inside the tab: a State among gr.Tabs' children would count as a tab
        gr.Markdown(ABOUT)
        with gr.Row():
            threshold = checked.Slider(
                0.01,
                0.5,
                value=views.DEFAULT_THRESHOLD,
                step=0.01,
                label="Threshold (routes under it are dropped)",
                elem_id="flow-threshold",
            )
            position = checked.PositionSlider(
                0, 1, value=1, step=1, label="Position read", elem_id="flow-position"
            )
        graph = figure_view(elem_id="flow-plot")
        gr.Markdown(NOT_PATCHING, elem_id="flow-not-patching")
        gr.Markdown(ROLLOUT_NOTE)
        rollout = figure_view(elem_id="rollout-plot")
    return FlowTab(
        tab=tab, is_open=is_open, threshold=threshold, position=position, graph=graph, rollout=rollout
    )

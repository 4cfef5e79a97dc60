"""Which heads look at a token: a click on a token of the strip (the strip's `select` event, its index
the token's position) shows a panel under it with every head's attention weight from the last position to
that token, layers × heads (`Run.attention_to`); the panel's position box takes another (`/attention_to`).
A click on a cell opens that head; a new run hides the panel, since its positions were the old prompt's
(hidden, it leaves the page's layout as it was)."""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from explorer import views
from explorer.app.ui import inputs as checked
from explorer.app.ui.common import EACH_TRIGGER, Shared, gpu, guarded, index, plot
from explorer.app.ui.plot_view import PlotView, figure_view
from explorer.app.ui.wiring import named

HINT = (
    "Click a token above: every head's attention weight from the last position to it, one cell per layer "
    "and head. Click a cell to open that head."
)

# The strip's clicks, as its `select` event: the token's position is the event's index.
TOKEN_CLICK_JS = """
element.addEventListener("click", (event) => {
  const token = event.target.closest && event.target.closest(".token");
  const position = Number(token?.querySelector(".position")?.textContent);
  if (token && Number.isInteger(position)) trigger("select", { index: position, value: token.title });
});
"""


@dataclass(frozen=True, kw_only=True)
class HeadsLookingAt:
    position: gr.Number  # the token looked at (a click on the strip sets it; typed, it draws too)
    panel: gr.Accordion
    plot: PlotView

    def wire(self, shared: Shared, token_strip: gr.HTML) -> None:
        outputs = [shared.status, self.panel, self.position, self.plot]

        def draw(shown, position):
            if shown is None or position is None:
                return {}
            key = index(position, "A token's position")
            run = shared.workspace.run(*shown)
            if not 0 <= key < run.n_tokens:
                raise ValueError(f"There is no position {key} in this prompt of {run.n_tokens} tokens.")
            figure = views.heads_looking_at(run, key)
            shown_panel = gr.Accordion(visible=True, open=True)
            return {
                self.panel: shown_panel,
                self.position: key,
                self.plot: plot(figure, f"heads-looking-at-{key}"),
            }

        def clicked(shown, token: gr.SelectData):
            return draw(shown, token.index)

        token_strip.select(
            gpu(guarded(shared.status)(clicked)),
            [shared.shown],
            outputs,
            api_name=False,
            **EACH_TRIGGER,
        )
        self.position.submit(
            *named(gpu(guarded(shared.status)(draw)), {"shown": shared.shown, "position": self.position}),
            outputs,
            api_name="attention_to",
            trigger_mode="always_last",
        )
        token_strip.change(
            lambda: (gr.Accordion(visible=False), None, None),
            None,
            [self.panel, self.position, self.plot],
            api_name=False,
            queue=False,
        )


def build() -> HeadsLookingAt:
    """The panel under the token strip, hidden until a token is clicked: the token's position, and the
    heads' weights on it."""
    with gr.Accordion("Heads looking at a token", visible=False, elem_id="heads-looking-at") as panel:
        gr.Markdown(HINT)
        position = checked.Number(
            label="Token position (Enter draws it)", precision=0, elem_id="looked-at-position"
        )
        heatmap = figure_view(elem_id="heads-looking-at-plot")
    return HeadsLookingAt(position=position, panel=panel, plot=heatmap)

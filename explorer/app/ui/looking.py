"""Which heads look at a token: a click on a token of the strip (the page writes "position,nonce" into
#picked-token) shows a panel under it with every head's attention weight from the last position to that
token, layers × heads (`Run.attention_to`). A click on a cell opens that head; a new run hides the panel,
since its positions were the old prompt's (hidden, it leaves the page's layout as it was)."""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from explorer import views
from explorer.app.ui.common import Shared, gpu, guarded, plot
from explorer.app.ui.plot_view import PlotView, figure_view

HINT = (
    "Click a token above: every head's attention weight from the last position to it, one cell per layer "
    "and head. Click a cell to open that head."
)


@dataclass(frozen=True, kw_only=True)
class HeadsLookingAt:
    picked: gr.Textbox  # "position,nonce" of the clicked token, written by the page
    panel: gr.Accordion
    plot: PlotView

    def wire(self, shared: Shared, token_strip: gr.HTML) -> None:
        @gpu
        @guarded(shared.status)
        def draw(shown, choice):
            if shown is None or not choice:
                return {}
            key = token_position(choice)
            run = shared.workspace.run(*shown)
            if key >= run.n_tokens:
                raise ValueError(f"There is no position {key} in this prompt of {run.n_tokens} tokens.")
            figure = views.heads_looking_at(run, key)
            shown_panel = gr.Accordion(visible=True, open=True)
            return {self.panel: shown_panel, self.plot: plot(figure, f"heads-looking-at-{key}")}

        self.picked.change(
            draw,
            [shared.shown, self.picked],
            [shared.status, self.panel, self.plot],
            api_name="attention_to",
            trigger_mode="always_last",
        )
        token_strip.change(
            lambda: (gr.Accordion(visible=False), None),
            None,
            [self.panel, self.plot],
            api_name=False,
            queue=False,
        )


def token_position(choice: str) -> int:
    """The position in "position,nonce" (the page's click), or a clear ValueError."""
    position = str(choice).split(",")[0].strip()
    if not position.isdecimal() or len(position) > 9:
        raise ValueError(f"A token's position must be a whole number, got {position[:40]!r}.")
    return int(position)


def build() -> HeadsLookingAt:
    """The hidden box the page writes, and the panel its plot draws in (under the token strip), hidden
    until a token is clicked."""
    picked = gr.Textbox(elem_id="picked-token", elem_classes="hidden-input", show_label=False)
    with gr.Accordion("Heads looking at a token", visible=False, elem_id="heads-looking-at") as panel:
        gr.Markdown(HINT)
        heatmap = figure_view(elem_id="heads-looking-at-plot")
    return HeadsLookingAt(picked=picked, panel=panel, plot=heatmap)

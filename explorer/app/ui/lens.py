"""The Lens tab: what the model is about to say after every layer (the logit lens), a target token's
rank across layers, and who writes its logit (direct logit attribution). Computed when the tab opens,
and again after a run while it is open; moving the window redraws the grid alone, a new target or
position the other two."""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from explorer import views
from explorer.app import limits
from explorer.app.ui import inputs as checked
from explorer.app.ui.common import (
    COSTLY,
    Shared,
    close_when,
    draw_while_open,
    gpu,
    guarded,
    index,
    plot,
    top,
)

INFO_TARGET = (
    "A single token of the model's vocabulary (mind the leading space); empty: the model's prediction."
)


@dataclass(frozen=True, kw_only=True)
class LensTab:
    tab: gr.Tab
    is_open: gr.State  # whether the tab is on screen, so a new run fills it at once
    start: gr.Slider  # the grid's first position, past LENS_WINDOW positions
    grid: gr.Plot
    target: gr.Textbox
    distractor: gr.Textbox
    position: gr.Slider  # where the target is read and attributed
    rank: gr.Plot
    attribution: gr.Plot

    def close_when(self, tabs: list[gr.Tab]) -> None:
        """Selecting any of these tabs takes the lens off screen."""
        close_when(self.is_open, tabs)

    def wire(self, shared: Shared, runs: list) -> None:
        """Open: everything; after a run (while open) the same; window, target and position: their part."""
        everything = [
            shared.status,
            self.is_open,
            self.start,
            self.position,
            self.grid,
            self.rank,
            self.attribution,
        ]
        reads = [shared.shown, self.start, self.target, self.distractor, self.position]

        @gpu
        @guarded(len(everything))
        def open_lens(request: gr.Request, shown, start, target, distractor, position):
            if shown is None:
                return gr.skip(), True, *(gr.skip(),) * 5
            run = shared.workspace.run(*shown)  # opened: the window's start, the position read at the end
            start, position = 0, run.n_tokens - 1
            with shared.readings.reading(request, limits.lens_cost(run), run):
                target = target or views.default_target(run, position)
                drawn = (
                    plot(views.lens_grid(run, start), "lens"),
                    plot(views.target_rank(run, target, position), "lens-rank"),
                    plot(views.attribution(run, target, distractor, position), "lens-attribution"),
                )
            return (
                gr.skip(),
                True,
                gr.Slider(maximum=top(max(run.n_tokens - views.LENS_WINDOW + 1, 1)), value=start),
                gr.Slider(maximum=top(run.n_tokens), value=position),
                *drawn,
            )

        draw_while_open(self.tab, self.is_open, open_lens, reads, everything, runs, api_name="lens")

        @gpu
        @guarded(2)
        def move_window(request: gr.Request, shown, start):
            if shown is None:
                return gr.skip(), gr.skip()
            run = shared.workspace.run(*shown)
            with shared.readings.reading(request, limits.lens_cost(run), run):
                return gr.skip(), plot(views.lens_grid(run, index(start, "first position")), "lens")

        self.start.release(
            move_window, [shared.shown, self.start], [shared.status, self.grid], api_name=False, **COSTLY
        )

        @gpu
        @guarded(3)
        def read_target(request: gr.Request, shown, target, distractor, position):
            if shown is None:
                return (gr.skip(),) * 3
            run = shared.workspace.run(*shown)
            position = index(position, "position")
            with shared.readings.reading(request, limits.lens_cost(run), run):
                target = target or views.default_target(run, position)
                return (
                    gr.skip(),
                    plot(views.target_rank(run, target, position), "lens-rank"),
                    plot(views.attribution(run, target, distractor, position), "lens-attribution"),
                )

        targets = [shared.shown, self.target, self.distractor, self.position]
        gr.on(
            [self.target.submit, self.distractor.submit, self.position.release],
            read_target,
            targets,
            [shared.status, self.rank, self.attribution],
            api_name="attribution",
            **COSTLY,
        )


def build() -> LensTab:
    with gr.Tab("Lens", id="lens", elem_id="tab-lens") as tab:
        is_open = gr.State(False)  # inside the tab: a State among gr.Tabs' children would count as a tab
        gr.Markdown(
            "What the model is about to say after every layer: each layer's stream read through the final "
            "norm and the LM head (the logit lens; layer 0 is the embeddings, the last is the model's "
            "output). Hover a cell for its top five and how far it is from the output (KL). Below, a "
            "target's rank across layers, and its **direct** attribution: what each head, MLP and the "
            "embedding wrote straight into that logit (patching, in Intervene, measures the total effect)."
        )
        start = checked.Slider(0, 1, value=0, step=1, label="First position shown", elem_id="lens-start")
        grid = gr.Plot(show_label=False, elem_id="lens-plot", elem_classes="wide-plot")
        with gr.Row():
            target = gr.Textbox(
                label="Target token", info=INFO_TARGET, elem_id="lens-target", max_length=1024
            )
            distractor = gr.Textbox(
                label="Against (optional)",
                info="A second token: attribute the difference.",
                elem_id="lens-distractor",
                max_length=1024,
            )
            position = checked.Slider(0, 1, value=1, step=1, label="Position read", elem_id="lens-position")
        rank = gr.Plot(show_label=False, elem_id="lens-rank-plot", elem_classes="wide-plot")
        attribution = gr.Plot(show_label=False, elem_id="lens-attribution-plot", elem_classes="wide-plot")
    return LensTab(
        tab=tab,
        is_open=is_open,
        start=start,
        grid=grid,
        target=target,
        distractor=distractor,
        position=position,
        rank=rank,
        attribution=attribution,
    )

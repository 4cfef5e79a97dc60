"""The Lens tab: what the model is about to say after every block (the logit lens), a target token's
rank across blocks, and who writes its logit (direct logit attribution). Computed when the tab opens,
and again after a run while it is open; moving the window redraws the grid alone, a new target or
position the other two. A target and "Against" belong to the prompt they were typed for: a new prompt
empties them (the rank then follows the model's own prediction), unless the person pinned them."""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from explorer import views
from explorer.app import limits
from explorer.app.ui import inputs as checked
from explorer.app.ui.common import COSTLY, AfterRuns, Shared, close_when, gpu, guarded, index, plot, top
from explorer.app.ui.plot_view import PlotView, figure_view
from explorer.app.ui.wiring import named

INFO_TARGET = (
    "A single token of the model's vocabulary (mind the leading space); empty: the model's prediction."
)


@dataclass(frozen=True, kw_only=True)
class LensTab:
    tab: gr.Tab
    is_open: gr.State  # whether the tab is on screen, so a new run fills it at once
    start: gr.Slider  # the grid's first position, past LENS_WINDOW positions
    grid: PlotView
    target: gr.Textbox
    distractor: gr.Textbox
    pinned: gr.Checkbox  # keep the target and "Against" for new prompts
    typed_for: gr.State  # the run they were last read for (None: none yet, e.g. from a link)
    position: gr.Slider  # where the target is read and attributed
    rank: PlotView
    attribution: PlotView

    @property
    def linked(self) -> tuple[gr.Textbox, gr.Textbox]:
        """What a link carries of the tab: the target and what it is read against (`share`)."""
        return self.target, self.distractor

    def close_when(self, tabs: list[gr.Tab]) -> None:
        """Selecting any of these tabs takes the lens off screen."""
        close_when(self.is_open, tabs)

    def wire(self, shared: Shared, after_runs: AfterRuns) -> None:
        """Open: everything; after a run, the target emptied for a new prompt and, while open, everything
        again (one step, so a run costs the page no more requests); window, target and position: their
        part."""
        everything = [
            shared.status,
            self.is_open,
            self.start,
            self.position,
            self.grid,
            self.rank,
            self.attribution,
        ]
        reads = {"shown": shared.shown, "start": self.start, "target": self.target}
        reads |= {"distractor": self.distractor, "position": self.position}

        @gpu
        @guarded(shared.status)
        def open_lens(request: gr.Request, shown, start, target, distractor, position):
            if shown is None:
                return {self.is_open: True}
            run = shared.workspace.run(*shown)  # opened: the window's start, the position read at the end
            start, position = 0, run.n_tokens - 1
            with shared.readings.reading(request, limits.lens_cost(run), run):
                drawn = {
                    self.grid: plot(views.lens_grid(run, start), "lens"),
                    self.rank: plot(views.target_rank(run, target, position), "lens-rank"),
                    self.attribution: plot(
                        attribution(run, target, distractor, position), "lens-attribution"
                    ),
                }
            return drawn | {
                self.is_open: True,
                self.start: gr.update(maximum=top(max(run.n_tokens - views.LENS_WINDOW + 1, 1)), value=start),
                self.position: gr.update(maximum=top(run.n_tokens), value=position),
            }

        kept = [self.target, self.distractor, self.typed_for]

        def after_run(
            request: gr.Request, opened, pinned, typed_for, shown, start, target, distractor, position
        ):
            emptied = forgets(shown, pinned, typed_for)
            target, distractor = ("", "") if emptied else (target, distractor)
            read = dict(shown=shown, start=start, target=target, distractor=distractor, position=position)
            drawn = open_lens(request, **read) if opened else {}
            boxes = {self.target: "", self.distractor: ""} if emptied else {}
            return {**drawn, **boxes, self.typed_for: shown}

        self.tab.select(*named(open_lens, reads), everything, api_name="lens", **COSTLY)
        forgetting = {"opened": self.is_open, "pinned": self.pinned, "typed_for": self.typed_for}
        after_runs.add(after_run, forgetting | reads, [*everything, *kept])

        @gpu
        @guarded(shared.status)
        def move_window(request: gr.Request, shown, start):
            if shown is None:
                return {}
            run = shared.workspace.run(*shown)
            with shared.readings.reading(request, limits.lens_cost(run), run):
                return {self.grid: plot(views.lens_grid(run, index(start, "first position")), "lens")}

        moved = named(move_window, {"shown": shared.shown, "start": self.start})
        self.start.release(*moved, [shared.status, self.grid], api_name=False, **COSTLY)

        @gpu
        @guarded(shared.status)
        def read_target(request: gr.Request, shown, target, distractor, position):
            """The rank and attribution of the target, which from now belongs to the prompt read."""
            if shown is None:
                return {}
            run = shared.workspace.run(*shown)
            position = index(position, "position")
            with shared.readings.reading(request, limits.lens_cost(run), run):
                return {
                    self.rank: plot(views.target_rank(run, target, position), "lens-rank"),
                    self.attribution: plot(
                        attribution(run, target, distractor, position), "lens-attribution"
                    ),
                    self.typed_for: shown,
                }

        targets = {key: reads[key] for key in ("shown", "target", "distractor", "position")}
        gr.on(
            [self.target.submit, self.distractor.submit, self.position.release],
            *named(read_target, targets),
            [shared.status, self.rank, self.attribution, self.typed_for],
            api_name="attribution",
            **COSTLY,
        )


def attribution(run, target: str, distractor: str, position: int):
    """Who writes the target's logit (the model's own prediction when none is typed)."""
    position = index(position, "position")
    return views.attribution(run, target or views.default_target(run, position), distractor, position)


def forgets(shown, pinned: bool, typed_for) -> bool:
    """Whether a run empties the target and "Against": they were typed for another prompt (or model)
    and are not pinned. Those of a link, typed for no run yet, belong to the run it opens."""
    return typed_for is not None and not pinned and tuple(shown or ()) != tuple(typed_for)


def build() -> LensTab:
    with gr.Tab("Lens", id="lens", elem_id="tab-lens") as tab:
        is_open = gr.State(False)  # inside the tab: a State among gr.Tabs' children would count as a tab
        gr.Markdown(
            "What the model is about to say after every block: the stream read through the final norm "
            "and the LM head (the logit lens), first as the embeddings, then after each block, numbered "
            "as the layers and heads are elsewhere (head 23.4 writes into the row after block 23; the "
            "last row is the model's output). Hover a cell for its top five and how far it is from the "
            "output (KL). Below, a target's rank after every block, and its **direct** attribution: what "
            "each head, MLP and the embedding wrote straight into that logit (patching, in Intervene, "
            "measures the total effect). "
            "The target follows the model's prediction until you type one."
        )
        start = checked.PositionSlider(
            0, 1, value=0, step=1, label="First position shown", elem_id="lens-start"
        )
        grid = figure_view(elem_id="lens-plot")
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
            position = checked.PositionSlider(
                0, 1, value=1, step=1, label="Position read", elem_id="lens-position"
            )
        pinned = gr.Checkbox(
            False,
            label="Keep the target and “Against” for new prompts (else a new prompt empties them)",
            elem_id="lens-pinned",
        )
        typed_for = gr.State(None)
        rank = figure_view(elem_id="lens-rank-plot")
        attribution = figure_view(elem_id="lens-attribution-plot")
    return LensTab(
        tab=tab,
        is_open=is_open,
        start=start,
        grid=grid,
        target=target,
        distractor=distractor,
        pinned=pinned,
        typed_for=typed_for,
        position=position,
        rank=rank,
        attribution=attribution,
    )

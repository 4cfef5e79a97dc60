"""Why this score: a click on a cell of the head's maps (the pipeline, its thumbnail among every head's,
the zoom) opens a panel under the pipeline with that score split into the sources that built it
(query-side × key-side, `views.why_score`), and the query's whole row split into key-side sources at every key
(`views.what_drives_row`). The pipeline's own clicks are the layer view's `select_cell`; the page asks
for a cell of a thumbnail or the zoom, or a head opened from the Overview (its last query and the key it
looks at most there), through the layer view's `cell_asked`. The panel shows the cell's layer, head,
query and key, to change and split again ("Split", `/score_attribution`). A click on a head source opens
that head (page.js); a new run hides the panel, whose positions were the old prompt's. Under the split,
one of its largest sources is tested causally ("Test it", `views.source_test`): its write taken out of
the key's or the query's stream, zeroed or mean-replaced, the real score and weight beside the split's
prediction. "Knock it out" blocks the cell (its score −∞ before the softmax): the next token before and
after, and every view redrawn from the knocked-out run (`shown` holds the `Knockout`); "Put it back"
shows the plain run again. The panel stays while `shown` is the run its split was read from."""

from __future__ import annotations

import copy
import html
import threading
from dataclasses import dataclass

import gradio as gr

from explorer import views
from explorer.app import limits, markup
from explorer.app.ui import inputs as checked
from explorer.app.ui.common import COSTLY, EACH_TRIGGER, Shared, gpu, guarded, index, picked_head, plot
from explorer.app.ui.layer_view import CellAskedData, CellData
from explorer.app.ui.plot_view import PlotView, figure_view
from explorer.app.ui.wiring import named
from explorer.engine.edits import Knockout

HINT = (
    "Each cell is one query-side source × one key-side source: what the embedding, an earlier head, an "
    "MLP or a bias wrote into the stream at the query and at the key, each read through the norms (their "
    "scales frozen at the real stream's) and RoPE, so the parts sum to the score. Bars: each source's "
    "part on its side. Below, the query's row: each key-side source's part at every key. Click a head's "
    "bar, cell or row to open that head."
)


class SplitOf:
    """The `shown` the split on screen was read from. A State reaches every handler of its session as
    the same object, so the panel's hide step sees a split drawn after `shown` changed. A split is drawn
    holding `lock`, and the hide step reads under it: it reads after the split is drawn and skips, or
    answers before the split begins, never reading "no split" while one is being drawn and hiding it
    once drawn. (Not a dataclass: Gradio would copy its fields, the lock among them, into the page's
    config.)"""

    def __init__(self, shown: tuple | None = None):
        self.shown = shown
        self.lock = threading.Lock()

    def __deepcopy__(self, memo) -> SplitOf:
        """Gradio copies a State's first value for each session: a lock of its own for each."""
        return SplitOf(copy.deepcopy(self.shown, memo))


@dataclass(frozen=True, kw_only=True)
class WhyPanel:
    numbers: tuple[gr.Number, gr.Number, gr.Number, gr.Number]  # the cell's layer, head, query, key
    ask: gr.Button  # "Split": the numbers' cell (the endpoint `/score_attribution`)
    cell: gr.State  # (layer, head, query, key) of the split on screen, for links; None before one
    panel: gr.Accordion
    split: PlotView
    source: gr.Dropdown  # the split's largest sources on each side, to test
    mode: gr.Radio  # zeroed or mean-replaced
    test: gr.Button
    tested: gr.HTML  # the test's line
    row: PlotView
    split_of: gr.State  # SplitOf: the `shown` the split on screen was read from
    knock: gr.Button  # "Knock it out": the numbers' cell blocked, every view redrawn
    restore: gr.Button  # "Put it back": the plain run again
    knocked: gr.HTML  # what the knockout did, in a line
    knock_bars: PlotView  # the next token before and after
    knock_area: gr.Column  # the two, shown while a cell is knocked out
    knocked_cells: gr.State  # (prompt, `Knockout.spelled`) of the knockout on screen, or a link's; or None

    @property
    def cell_numbers(self) -> dict:
        """The cell's numbers by the names the handlers (and the API) take them by."""
        return dict(zip(("layer", "head", "query", "key"), self.numbers, strict=True))

    def wire(self, shared: Shared, view: PlotView) -> None:
        """Wired to the layer view's clicks (`view.select_cell`) and the page's asks (`view.cell_asked`)."""
        outputs = [shared.status, self.panel, self.split, self.row, *self.numbers, self.cell]
        outputs += [self.source, self.tested]

        def draw(request: gr.Request, layer, head, query, key, shown, split_of: SplitOf):
            if shown is None:
                return {}
            run = shared.workspace.run(*shown)
            with split_of.lock, shared.readings.reading(request, limits.why_cost(run), run):
                drawn = split_and_row(run, layer, head, query, key)
                split_of.shown = tuple(shown)
            return drawn

        def split_and_row(run, layer, head, query, key):
            layer, head = picked_head(run, layer, head)
            query = (
                run.n_tokens - 1
                if query is None
                else views.clamp_position(run, index(query, "query position"))
            )
            if key is None:  # the key the head looks at most from the query
                key = int(run.attention_rows(layer, [query], head).probs[0, 0].argmax())
            key = views.clamp_position(run, index(key, "key position"))
            attribution = run.score_attribution(layer, head, query, key)
            split = views.why_score(run, layer, head, query, key, attribution=attribution)
            row = views.what_drives_row(run, layer, head, query)
            choices = views.testable_sources(attribution)
            return {
                self.source: gr.update(choices=choices, value=choices[0][1] if choices else None),
                self.tested: "",
                self.panel: gr.Accordion(visible=True, open=True),
                self.split: plot(split, f"why-layer{layer}-head{head}-q{query}-k{key}"),
                self.row: plot(row, f"drivers-layer{layer}-head{head}-q{query}"),
                **dict(zip(self.numbers, (layer, head, query, key), strict=True)),
                self.cell: (layer, head, query, key),
            }

        def asked_cell(request: gr.Request, shown, split_of, cell: CellAskedData):
            return draw(request, cell.layer, cell.head, cell.query, cell.key, shown, split_of)

        def from_view(request: gr.Request, layer, head, shown, split_of, cell: CellData):
            return draw(request, layer, head, cell.query, cell.key, shown, split_of)

        handled = gpu(guarded(shared.status)(draw))
        read = {"shown": shared.shown, "split_of": self.split_of}
        view.select_cell(
            *named(
                gpu(guarded(shared.status)(from_view)), {"layer": shared.layer, "head": shared.head, **read}
            ),
            outputs,
            api_name=False,
            **EACH_TRIGGER,
            **COSTLY,
        )
        view.cell_asked(
            *named(gpu(guarded(shared.status)(asked_cell)), read),
            outputs,
            api_name=False,
            **EACH_TRIGGER,
            **COSTLY,
        )
        self.ask.click(
            *named(handled, {**self.cell_numbers, **read}),
            outputs,
            api_name="score_attribution",
            **COSTLY,
        )
        hidden = [self.panel, self.split, self.row, self.cell, self.tested, self.knocked, self.knock_bars]
        hidden += [self.knock_area, self.restore]

        def hide_unless_read(shown, split_of: SplitOf):
            """A new prompt, or another run of it than the split's (an ablation shown): the panel goes.
            `split_of` is read as it is now, not as it was when `shown` changed: a split the page asked
            for since (a link's cell, drawn once the run's maps are) stays."""
            with split_of.lock:
                split_is_of_it = shown is not None and split_of.shown == tuple(shown)
            if split_is_of_it:
                return gr.skip()  # every output as it is
            gone = gr.update(visible=False)  # (an update: a component made here would join the page)
            return dict(zip(hidden, (gone, None, None, None, "", "", None, gone, gone), strict=True))

        shared.shown.change(*named(hide_unless_read, read), hidden, api_name=False)

        def test(request: gr.Request, cell, choice, mode, shown):
            """The source picked removed from its side of the cell on screen."""
            if cell is None or shown is None:
                raise ValueError("Click a cell of the head's maps first: the test is of its split.")
            run = shared.workspace.run(*shown)
            with shared.readings.reading(request, limits.why_cost(run), run):
                line = views.source_test(run, *cell, choice, mode)
            return {self.tested: f'<p class="why-test-line">{html.escape(line)}</p>'}

        self.test.click(
            *named(
                gpu(guarded(shared.status)(test)),
                {"cell": self.cell, "choice": self.source, "mode": self.mode, "shown": shared.shown},
            ),
            [shared.status, self.tested],
            api_name="source_effect",
            **COSTLY,
        )

    @property
    def linked(self) -> dict:
        """What of the panel a link carries: the cell split, the cells knocked out (`share`)."""
        return {"cell": self.cell, "knockout": self.knocked_cells}

    def wire_knockout(self, shared: Shared, stale: gr.State, redraw_if, runs: list) -> None:
        """ "Knock it out" and "Put it back", which change `shown` and so `stale` (the views redrawn); and
        after each run, the cells a link knocks out, when the run is of its prompt."""
        outputs = [shared.status, self.knocked, self.knock_bars, self.restore, shared.shown]
        outputs += [self.knock_area, self.knocked_cells, stale]

        @gpu
        def knocked_out(request: gr.Request, shown, split_of: SplitOf, knockout: Knockout) -> dict:
            model, text = shown[:2]
            before = shared.workspace.run(*shown)
            with shared.readings.reading(request, limits.why_cost(before), before):
                after = shared.workspace.run(model, text, knockout)
                line = views.knockout_summary(before, after, knockout)
                bars = plot(views.ablation_next_tokens(before, after), "knockout")
            knocked = split_of.shown = (model, text, knockout)
            return {
                shared.status: markup.status(line, "info"),
                self.knocked: f'<p class="why-knockout-line">{html.escape(line)}</p>',
                self.knock_bars: bars,
                self.restore: gr.update(visible=True),
                self.knock_area: gr.update(visible=True),
                shared.shown: knocked,
                self.knocked_cells: (text, knockout.spelled()),
            } | redraw_if(stale, True)

        def knock(request: gr.Request, layer, head, query, key, shown, split_of):
            if shown is None:
                raise ValueError("Run a prompt first: a knockout blocks a cell of its attention.")
            on_screen = shown[2] if len(shown) > 2 and isinstance(shown[2], Knockout) else None
            cells = (index(layer, "layer"), index(head, "head"), index(query, "query"), index(key, "key"))
            return knocked_out(request, shown, split_of, Knockout.adding(on_screen, cells))

        def linked(request: gr.Request, cells, shown, split_of):
            """A link's cells, knocked out once its prompt has run; another prompt's run forgets them.
            Most runs name none: the check itself asks for no GPU."""
            if not cells or shown is None or len(shown) > 2:
                return {}
            if shown[1] != cells[0]:
                return {self.knocked_cells: None}
            return knocked_out(request, shown, split_of, Knockout.read(cells[1]))

        def restore(shown, split_of):
            if shown is None or len(shown) < 3:
                return {}
            plain = split_of.shown = tuple(shown[:2])
            return {
                shared.status: markup.status("The cells are back: the views show the plain run.", "info"),
                self.knocked: "",
                self.knock_bars: None,
                self.restore: gr.update(visible=False),
                self.knock_area: gr.update(visible=False),
                shared.shown: plain,
                self.knocked_cells: None,
            } | redraw_if(stale, True)

        read = {"shown": shared.shown, "split_of": self.split_of}
        self.knock.click(
            *named(guarded(shared.status)(knock), {**self.cell_numbers, **read}),
            outputs,
            api_name="knockout",
            **COSTLY,
        )
        self.restore.click(*named(guarded(shared.status)(restore), read), outputs, api_name="restore")
        for event in runs:
            event.then(
                *named(guarded(shared.status)(linked), {"cells": self.knocked_cells, **read}),
                outputs,
                api_name=False,
            )


def build() -> WhyPanel:
    """The panel, hidden until a cell is clicked: the cell's numbers and "Split", and its two charts."""
    with gr.Accordion("Why this score", visible=False, elem_id="why-score") as panel:
        gr.Markdown(HINT)
        with gr.Row(elem_id="why-cell"):
            names = ("Layer", "Head", "Query position", "Key position")
            numbers = tuple(
                checked.Number(
                    precision=0, label=name, min_width=120, elem_id=f"score-{name.split()[0].lower()}"
                )
                for name in names
            )
            ask = gr.Button("Split", elem_id="score-ask", scale=0, min_width=100)
            knock = gr.Button("Knock it out", elem_id="why-knockout-button", scale=0, min_width=150)
            restore = gr.Button(
                "Put it back", elem_id="why-restore-button", scale=0, min_width=150, visible=False
            )
        with gr.Column(visible=False, elem_id="why-knockout") as knock_area:  # shown once a cell is out
            knocked = gr.HTML(elem_id="why-knockout-result")
            knock_bars = figure_view(elem_id="why-knockout-plot")
        split = figure_view(elem_id="why-split-plot")
        with gr.Row(elem_id="why-test"):
            source = checked.Dropdown(
                [],
                label="Remove a source's write",
                allow_custom_value=True,
                elem_id="why-test-source",
                scale=3,
            )
            mode = checked.Radio(
                [("zeroed", "zero"), ("its mean over the prompt", "mean")],
                value="zero",
                label="Replaced by",
                elem_id="why-test-mode",
                scale=2,
            )
            test = gr.Button("Test it", elem_id="why-test-button", scale=0, min_width=100)
        tested = gr.HTML(elem_id="why-test-result")
        row = figure_view(elem_id="why-row-plot")
    cell = gr.State(None)
    return WhyPanel(
        numbers=numbers,
        ask=ask,
        cell=cell,
        panel=panel,
        split=split,
        source=source,
        mode=mode,
        test=test,
        tested=tested,
        row=row,
        split_of=gr.State(SplitOf()),
        knock=knock,
        restore=restore,
        knocked=knocked,
        knock_bars=knock_bars,
        knock_area=knock_area,
        knocked_cells=gr.State(None),
    )

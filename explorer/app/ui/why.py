"""Why this score: a click on a cell of the head's maps (the pipeline, its thumbnail among every head's,
the zoom) opens a panel under the pipeline with that score split into the sources that built it
(query-side × key-side, `views.why_score`), and the query's whole row split into key-side sources at every key
(`views.what_drives_row`). The page writes "layer,head,query,key,nonce" into #score-cell (opening a head
from the Overview: its last query and the key it looks at most there); the endpoint
`/score_attribution` takes the four numbers. A click on a head source opens that head (page.js); a new
run hides the panel, whose positions were the old prompt's."""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from explorer import views
from explorer.app import limits
from explorer.app.ui.common import COSTLY, Shared, gpu, guarded, index, picked_head, plot
from explorer.app.ui.layer_view import CellData
from explorer.app.ui.plot_view import PlotView, figure_view

HINT = (
    "Each cell is one query-side source × one key-side source: what the embedding, an earlier head, an "
    "MLP or a bias wrote into the stream at the query and at the key, each read through the norms (their "
    "scales frozen at the real stream's) and RoPE, so the parts sum to the score. Bars: each source's "
    "part on its side. Below, the query's row: each key-side source's part at every key. Click a head's "
    "bar, cell or row to open that head."
)


@dataclass(frozen=True, kw_only=True)
class WhyPanel:
    cell: gr.Textbox  # "layer,head,query,key,nonce" of the clicked cell, written by the page
    numbers: tuple[
        gr.Number, gr.Number, gr.Number, gr.Number
    ]  # hidden: the endpoint's layer, head, query, key
    ask: gr.Button  # hidden: the endpoint `/score_attribution`
    panel: gr.Accordion
    split: PlotView
    row: PlotView

    def wire(self, shared: Shared, view: PlotView) -> None:
        """Wired to the page's #score-cell and to the layer view's clicks (`view.select_cell`)."""
        outputs = [shared.status, self.panel, self.split, self.row, *self.numbers]

        def draw(request: gr.Request, layer, head, query, key, shown):
            if shown is None:
                return {}
            run = shared.workspace.run(*shown)
            with shared.readings.reading(request, limits.why_cost(run), run):
                return split_and_row(run, layer, head, query, key)

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
            split = views.why_score(run, layer, head, query, key)
            row = views.what_drives_row(run, layer, head, query)
            return {
                self.panel: gr.Accordion(visible=True, open=True),
                self.split: plot(split, f"why-layer{layer}-head{head}-q{query}-k{key}"),
                self.row: plot(row, f"drivers-layer{layer}-head{head}-q{query}"),
                **dict(zip(self.numbers, (layer, head, query, key), strict=True)),
            }

        def from_cell(request: gr.Request, choice, shown):
            return draw(request, *cell_numbers(choice), shown)

        def from_view(request: gr.Request, layer, head, shown, cell: CellData):
            return draw(request, layer, head, cell.query, cell.key, shown)

        handled = gpu(guarded(shared.status)(draw))
        view.select_cell(
            gpu(guarded(shared.status)(from_view)),
            [shared.layer, shared.head, shared.shown],
            outputs,
            api_name=False,
            trigger_mode="always_last",
            **COSTLY,
        )
        self.cell.change(
            gpu(guarded(shared.status)(from_cell)),
            [self.cell, shared.shown],
            outputs,
            api_name=False,
            trigger_mode="always_last",
            **COSTLY,
        )
        self.ask.click(
            handled, [*self.numbers, shared.shown], outputs, api_name="score_attribution", **COSTLY
        )
        shared.shown.change(
            lambda: (gr.Accordion(visible=False), None, None),
            None,
            [self.panel, self.split, self.row],
            api_name=False,
        )


def cell_numbers(choice: str) -> tuple[int, int, int | None, int | None]:
    """The layer, head, query and key in "layer,head,query,key,nonce" (the page's click; a query "last"
    is the last position, a key "top" the one the head looks at most: None), or a clear ValueError."""
    parts = [part.strip() for part in str(choice).split(",")[:4]]
    words = ["", "", "last", "top"]
    if len(parts) < 4 or not all(
        (part.isdecimal() and len(part) <= 9) or part == word for part, word in zip(parts, words, strict=True)
    ):
        raise ValueError(f"A cell is a layer, head, query and key, got {str(choice)[:40]!r}.")
    return tuple(None if part in words[2:] else int(part) for part in parts)


def build() -> WhyPanel:
    """The hidden inputs the page (or an API call) writes, and the panel, hidden until a cell is clicked."""
    with gr.Column(elem_classes="hidden-input"):  # hidden whole: no gap in the tab's column
        cell = gr.Textbox(elem_id="score-cell", show_label=False)
        names = ("layer", "head", "query", "key")
        numbers = tuple(gr.Number(precision=0, label=name, elem_id=f"score-{name}") for name in names)
        ask = gr.Button(elem_id="score-ask")
    with gr.Accordion("Why this score", visible=False, elem_id="why-score") as panel:
        gr.Markdown(HINT)
        split = figure_view(elem_id="why-split-plot")
        row = figure_view(elem_id="why-row-plot")
    return WhyPanel(cell=cell, numbers=numbers, ask=ask, panel=panel, split=split, row=row)

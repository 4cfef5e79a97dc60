"""The Intervene tab: ablate heads in the run on screen and compare the next token before and after
(and, toggled on, show the ablated run in every other view); patch every head from a clean prompt into
a corrupted one (`explorer.app.ui.patching`).

- Ablation applies to the prompt on screen and follows it: after every run (Run, an example, a model
  loaded) the heads picked are ablated again in the new run. With "show the ablated run in the other
  views", `shared.shown` holds (model, prompt, ablation): the views read `workspace.run(*shown)` as
  always, and get the ablated run, cached apart from the plain one.
- The ablation's chart says what it did to logit(answer) − logit(distractor) of the patching section's
  answer and distractor where both are single tokens, else to the plain run's two likeliest tokens.
- An example meant for another model than the loaded one loads that model first.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

import gradio as gr

from explorer import views
from explorer.app import markup
from explorer.app.examples import ABLATION_EXAMPLES, ABLATION_LABELS, SWAPS_MODEL
from explorer.app.ui import inputs as checked
from explorer.app.ui import overview, patching
from explorer.app.ui.common import Handler, Shared, gpu, guarded, on_gpu, plot, sent
from explorer.app.ui.model_loading import Loader
from explorer.app.ui.overview import OverviewTab
from explorer.app.ui.plot_view import PlotView, figure_view
from explorer.app.ui.wiring import named
from explorer.engine.config import ModelConfig
from explorer.engine.interventions import ABLATE_MODES, Ablation, single_token
from explorer.engine.tokens import quoted
from explorer.errors import PromptError
from explorer.loading import catalog

HEAD = re.compile(r"\s*(\d+)\s*[.,:]\s*(\d+)\s*(·.*)?")  # "3.1", "3.1 · kv 0", "3, 1"
ABLATION_INTRO = (
    "### Ablate heads\nA head's output (`probs @ v`, before `o_proj`) is set to 0, or to its mean over "
    "the prompt, at every position of the prompt on screen; the bars compare the next token before and "
    "after, and the title the logit difference of the answer and distractor below (or of the two "
    "likeliest tokens). Pick heads below, or open one (the Layer and Head above, a head's thumbnail, an "
    "Overview cell) and add it."
)


@dataclass(frozen=True, kw_only=True)
class PageParts:
    """What the tab's events reach outside it."""

    prompt: gr.Textbox
    picker: gr.Dropdown
    model: gr.State  # source of the loaded model
    loader: Loader
    overview: OverviewTab
    run: Handler  # runs the prompt in the prompt box and draws every view
    redraw: Handler  # redraws the head's and the layer's views of the run in `shown`


@dataclass(frozen=True, kw_only=True)
class InterveneTab:
    tab: gr.Tab
    heads: gr.Dropdown  # heads to ablate, values "layer.head"
    mode: gr.Radio  # zero or mean
    add: gr.Button  # adds the head on screen
    ablate: gr.Button
    in_views: gr.Checkbox  # the other views show the ablated run
    bars: PlotView  # next-token probabilities before and after
    ablation_examples: gr.Examples
    patching: patching.PatchingSection
    listed_for: gr.State  # the model source whose heads `heads` lists
    stale: gr.State  # a new number each time a handler changed `shown`: its change redraws the views

    @property
    def prompts(self) -> tuple[gr.Textbox, gr.Textbox, gr.Textbox, gr.Textbox]:
        """The patching prompts: clean, corrupted, answer, distractor (what a link carries)."""
        return self.patching.prompts

    def wire(self, shared: Shared, page: PageParts, runs: list) -> None:
        """Wire the tab's events. The runs they start join `runs`, so what the layout chains after
        every run (the zoom's window) follows them too; after every run, the tab ablates the heads
        picked in the new one."""
        _Events(self, shared, page).wire(runs)


def build(shared: Shared, prompt: gr.Textbox, picker: gr.Dropdown) -> InterveneTab:
    with gr.Tab("Intervene", id="intervene", elem_id="tab-intervene") as tab:
        gr.Markdown(ABLATION_INTRO)
        with gr.Row():
            heads = checked.Dropdown(
                [],
                value=[],
                multiselect=True,
                allow_custom_value=True,
                label="Heads to ablate (layer.head · the kv head it reads)",
                elem_id="ablate-heads",
                scale=3,
                min_width=260,
            )
            mode = checked.Radio(list(ABLATE_MODES), value="zero", label="Ablation", elem_id="ablate-mode")
        with gr.Row():
            add = gr.Button("Add the head on screen", elem_id="ablate-add")
            ablate = gr.Button("Ablate", variant="primary", elem_id="ablate-button")
        in_views = gr.Checkbox(
            False,
            label="Show the ablated run in the other views (the maps of the layers after the ablated heads)",
            elem_id="ablate-in-views",
        )
        gr.Markdown(SWAPS_MODEL, elem_classes="swaps-model")
        ablation_examples = gr.Examples(
            [
                [text, [f"{layer}.{head}" for layer, head in pairs], "zero", catalog.BUNDLED_LABEL]
                for text, pairs in ABLATION_EXAMPLES
            ],
            inputs=[prompt, heads, mode, picker],
            example_labels=ABLATION_LABELS,
            label="Ablation examples",
            elem_id="ablation-examples",
        )
        bars = figure_view(elem_id="ablation-plot")
        section = patching.build(prompt, picker, shared.workspace)
        # inside the tab: a State among gr.Tabs' children would count as a tab
        listed_for, stale = gr.State(None), gr.State(0)
    return InterveneTab(
        tab=tab,
        heads=heads,
        mode=mode,
        add=add,
        ablate=ablate,
        in_views=in_views,
        bars=bars,
        ablation_examples=ablation_examples,
        patching=section,
        listed_for=listed_for,
        stale=stale,
    )


def head_choices(config: ModelConfig) -> list[tuple[str, str]]:
    """Every head of every layer, as (label, value): ("3.5 · kv 1", "3.5")."""
    return [
        (views.layer_head_name(config, layer, head), f"{layer}.{head}")
        for layer in range(config.n_layers)
        for head in range(config.n_heads)
    ]


def parse_head(value) -> tuple[int, int]:
    """(layer, head) from a picked or typed value: "3.1", "3.1 · kv 0" or "3, 1"."""
    match = HEAD.fullmatch(str(value))
    if match is None:
        raise ValueError(f"“{quoted(str(value))}” is not a head: write layer.head, e.g. 3.1.")
    return int(match[1]), int(match[2])


def has_head(config: ModelConfig, value) -> bool:
    try:
        layer, head = parse_head(value)
    except ValueError:
        return False
    return layer < config.n_layers and head < config.n_heads


_REDRAWS = itertools.count(1)


def redraw_if(stale: gr.State, changed: bool) -> dict:
    """`stale`'s update: a number it never held when the views must be redrawn (its change event
    redraws them), else none (no event)."""
    return {stale: next(_REDRAWS)} if changed else {}


class _Events:
    """The tab's handlers, closed over the page they act on; those that compute are wrapped by `on_gpu`
    where they are wired."""

    def __init__(self, tab: InterveneTab, shared: Shared, page: PageParts):
        self.tab, self.shared, self.page = tab, shared, page
        self.workspace = shared.workspace

    def wire(self, runs: list) -> None:
        t, s, p = self.tab, self.shared, self.page
        pair = gr.State(("", ""))  # the patching answer and distractor: what the ablation's title reads
        answer, distractor = t.prompts[2:]
        gr.on(
            [answer.change, distractor.change],
            *named(
                lambda answer, distractor: (answer, distractor), {"answer": answer, "distractor": distractor}
            ),
            pair,
            api_name=False,
        )
        ablation_inputs = {
            "heads": t.heads,
            "mode": t.mode,
            "in_views": t.in_views,
            "shown": s.shown,
            "pair": pair,
        }
        ablation_outputs = [s.status, t.bars, s.shown, t.stale]
        ablate = named(on_gpu(self.ablate, s.status), ablation_inputs)
        t.ablate.click(*ablate, ablation_outputs, api_name="ablate")
        t.in_views.input(
            *named(on_gpu(self.toggle, s.status), ablation_inputs), ablation_outputs, api_name=False
        )
        add = named(self.add, {"heads": t.heads, "layer": s.layer, "head": s.head})
        t.add.click(*add, t.heads, api_name=False)

        examples = t.ablation_examples.load_input_event
        load_for = named(self.load_for, {"choice": p.picker, "model": p.model})
        runs.append(p.run.after(examples.then(*load_for, p.loader.outputs, api_name=False)))
        patching.PatchingEvents(t.patching, s, p).wire(t.tab, runs, self.load_for)
        follow_inputs = {**ablation_inputs, "model": p.model, "listed_for": t.listed_for}
        follow_outputs = [s.status, t.heads, t.listed_for, t.bars, s.shown, t.stale]
        for event in runs:
            event.then(*named(on_gpu(self.follow, s.status), follow_inputs), follow_outputs, api_name=False)
        self.redraw_when_stale()

    def redraw_when_stale(self):
        """When a handler changed `shown` (and so `stale`): the views (and the Overview, if open) again.
        A change event of the State's, not a step chained after every run: most runs ablate nothing,
        and then no event is sent at all."""
        s, p = self.shared, self.page

        overview_outputs = [s.status, *p.overview.outputs]

        @gpu
        @guarded(s.status)
        def overview_again(is_open, shown):
            if not (is_open and shown):
                return {}
            drawn = overview.figures(self.workspace.cached_run(*shown))
            return dict(zip(p.overview.outputs, drawn, strict=True))

        # Gradio sends a State's change when a page opens too: its first value (0) redraws nothing.
        def redraw(stale, redrawn):
            return p.redraw.fn(**redrawn) if stale else sent({})

        def overview_if_stale(stale, is_open, shown):
            return overview_again(is_open, shown) if stale else sent({})

        stale = self.tab.stale
        stale.change(
            *named(overview_if_stale, {"stale": stale, "is_open": p.overview.is_open, "shown": s.shown}),
            overview_outputs,
            api_name=False,
        )
        stale.change(
            *named(redraw, {"stale": stale, "redrawn": p.redraw.inputs}),
            p.redraw.outputs,
            api_name=False,
            show_progress_on=s.status,
        )

    # --- ablation ---------------------------------------------------------------------------------

    def ablation(self, shown, heads, mode) -> Ablation | None:
        config = self.workspace.explorer(shown[0], load=False).config
        n_heads = config.n_layers * config.n_heads
        if len(heads or ()) > n_heads:
            raise ValueError(f"{len(heads):,} heads were sent to ablate; this model has {n_heads:,}.")
        return Ablation.parse(config, [parse_head(value) for value in heads or ()], mode)

    def ablated(self, shown, ablation: Ablation, in_views: bool, pair) -> dict:
        """Status, bars, what the views show and whether that changed, for an ablation of the prompt
        on screen."""
        model, text = shown[:2]
        plain, ablated = self.workspace.run(model, text), self.workspace.run(model, text, ablation)
        on_screen = (model, text, ablation) if in_views else (model, text)
        views_show = "the ablated run" if in_views else "the plain run"
        message = f"{str(ablation).capitalize()} in the prompt on screen; the other views show {views_show}."
        tokenizer = plain.explorer.tokenizer
        bars = plot(views.ablation_next_tokens(plain, ablated, token_pair(tokenizer, *(pair or ("", "")))))
        t, s = self.tab, self.shared
        updates = {s.status: markup.status(message, "info"), t.bars: bars, s.shown: on_screen}
        return updates | redraw_if(t.stale, on_screen != tuple(shown))

    def ablate(self, heads, mode, in_views, shown, pair):
        """The Ablate button (and /ablate): the heads picked, ablated in the prompt on screen."""
        if shown is None:
            raise ValueError("Run a prompt first: the ablation applies to the prompt on screen.")
        ablation = self.ablation(shown, heads, mode)
        if ablation is None:
            raise ValueError(
                "Pick at least one head to ablate (layer.head, e.g. 3.1), or open one and add it."
            )
        return self.ablated(shown, ablation, in_views, pair)

    def toggle(self, heads, mode, in_views, shown, pair):
        """Show the ablated run in the other views, or the plain one again."""
        if shown is None:
            return {}
        ablation = self.ablation(shown, heads, mode)
        if ablation is None:  # nothing ablated: the views show the plain run
            plain = tuple(shown[:2])
            return {self.shared.shown: plain} | redraw_if(self.tab.stale, plain != tuple(shown))
        return self.ablated(shown, ablation, in_views, pair)

    def follow(self, heads, mode, in_views, shown, pair, model, listed_for):
        """After a run: the heads of the loaded model listed (those picked kept where it has them), and
        the heads picked ablated again in the run on screen."""
        t, s = self.tab, self.shared
        picked, listed = heads or [], {t.listed_for: listed_for}
        if model != listed_for and self.workspace.is_loaded(model):  # (a model that failed: the run warned)
            config = self.workspace.explorer(model, load=False).config
            picked = [value for value in picked if has_head(config, value)]
            listed = {t.heads: gr.update(choices=head_choices(config), value=picked), t.listed_for: model}
        if shown is None:
            return listed
        ablation = self.ablation(shown, picked, mode)
        if ablation is None:
            return listed | {t.bars: None}
        ablated = self.ablated(shown, ablation, in_views, pair)
        return listed | {k: v for k, v in ablated.items() if in_views or k is not s.status}

    @staticmethod
    def add(heads, layer, head):
        """The head on screen joins the heads picked."""
        value = f"{int(layer)}.{int(head)}"
        picked = list(heads or [])
        return picked if value in picked else [*picked, value]

    def load_for(self, choice, model, request: gr.Request):
        """An example meant for another model than the loaded one loads it first."""
        if catalog.source_of(choice) == (model or ""):
            return sent({})
        return guarded(self.shared.status)(self.load)(choice, request)

    def load(self, choice, request):
        if choice not in [label for label, _ in catalog.choices()]:
            hint = f" `{catalog.SMOLLM2_INSTALL}` installs it." if choice == catalog.SMOLLM2_LABEL else ""
            raise ValueError(f"This example is meant for {choice}, which is not installed here.{hint}")
        return self.page.loader.load(choice, request)


def token_pair(tokenizer, answer: str, distractor: str) -> tuple[int, int] | None:
    """The ids of the answer and distractor when both are single tokens, else None."""
    try:
        return single_token(tokenizer, answer, "answer"), single_token(tokenizer, distractor, "distractor")
    except PromptError:
        return None

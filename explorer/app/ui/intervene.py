"""The Intervene tab: ablate heads in the run on screen and compare the next token before and after
(and, toggled on, show the ablated run in every other view); patch every head from a clean prompt into
a corrupted one, an L × H heatmap of the recovered fraction whose cells open that head.

- Ablation applies to the prompt on screen and follows it: after every run (Run, an example, a model
  loaded) the heads picked are ablated again in the new run. With "show the ablated run in the other
  views", `shared.shown` holds (model, prompt, ablation): the views read `workspace.run(*shown)` as
  always, and get the ablated run, cached apart from the plain one.
- A patching sweep reports its progress. A click on a cell (the page script writes "layer,head,nonce"
  into #patched-head) puts the clean prompt in the prompt box, runs it and opens that layer and head.
- An example meant for another model than the loaded one loads that model first.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

import gradio as gr

from explorer import views
from explorer.app import limits, markup
from explorer.app.examples import ABLATION_EXAMPLES, ABLATION_LABELS, PATCHING_EXAMPLES, SWAPS_MODEL
from explorer.app.ui import inputs as checked
from explorer.app.ui import overview
from explorer.app.ui.common import COSTLY, Handler, Shared, gpu, guarded, plot
from explorer.app.ui.model_loading import Loader
from explorer.app.ui.overview import OverviewTab
from explorer.engine.config import ModelConfig
from explorer.engine.interventions import ABLATE_MODES, Ablation
from explorer.engine.tokens import quoted
from explorer.loading import catalog

HEAD = re.compile(r"\s*(\d+)\s*[.,:]\s*(\d+)\s*(·.*)?")  # "3.1", "3.1 · kv 0", "3, 1"
# A sweep batches every head's patch, so its memory grows with L · H · N: the app takes short prompts
# (an IOI pair is ~20 tokens); from Python, patch_heads takes up to the model's context.
PATCH_MAX_TOKENS = 128
ABLATION_INTRO = (
    "### Ablate heads\nA head's output (`probs @ v`, before `o_proj`) is set to 0, or to its mean over "
    "the prompt, at every position of the prompt on screen; the bars compare the next token before and "
    "after. Pick heads below, or open one (the Layer and Head above, a head's thumbnail, an Overview "
    "cell) and add it."
)
PATCHING_INTRO = (
    "### Patch heads\nThe corrupted prompt runs with one head's output taken from the clean run, for "
    "every head in turn: how much of logit(answer) − logit(distractor) at the last position comes back "
    "(1: all of the clean run's, 0: none). The prompts need the same number of tokens; answer and "
    "distractor are single tokens (mind the leading space). Click a cell to open that head."
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
    bars: gr.Plot  # next-token probabilities before and after
    ablation_examples: gr.Examples
    prompts: tuple[gr.Textbox, gr.Textbox, gr.Textbox, gr.Textbox]  # clean, corrupted, answer, distractor
    patch: gr.Button
    heatmap: gr.Plot  # recovered fraction, layers × heads: each head's total effect
    direct: gr.Plot  # the clean prompt's direct logit attribution, beside it
    patching_examples: gr.Examples
    picked: gr.Textbox  # "layer,head,nonce" of a clicked heatmap cell, written by the page script
    listed_for: gr.State  # the model source whose heads `heads` lists
    stale: gr.State  # a new number each time a handler changed `shown`: its change redraws the views
    patched: gr.State  # (model source, clean prompt) of the heatmap on screen

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
        bars = gr.Plot(show_label=False, elem_id="ablation-plot", elem_classes="wide-plot")

        gr.Markdown(PATCHING_INTRO)
        with gr.Row():
            clean = gr.Textbox(label="Clean prompt", lines=2, elem_id="patch-clean", min_width=260)
            corrupted = gr.Textbox(
                label="Corrupted prompt (as many tokens)", lines=2, elem_id="patch-corrupted", min_width=260
            )
        with gr.Row():
            answer = gr.Textbox(label="Answer (one token)", elem_id="patch-answer", min_width=140)
            distractor = gr.Textbox(label="Distractor (one token)", elem_id="patch-distractor", min_width=140)
            patch = gr.Button("Patch every head", variant="primary", elem_id="patch-button", min_width=140)
        gr.Markdown(SWAPS_MODEL, elem_classes="swaps-model")
        patching_examples = gr.Examples(
            [[e.clean, e.corrupted, e.answer, e.distractor, e.model] for e in PATCHING_EXAMPLES.values()],
            inputs=[clean, corrupted, answer, distractor, picker],
            example_labels=[e.shows for e in PATCHING_EXAMPLES.values()],
            label="Patching examples",
            elem_id="patching-examples",
        )
        heatmap = gr.Plot(show_label=False, elem_id="patching-plot", elem_classes="wide-plot")
        direct = gr.Plot(show_label=False, elem_id="patching-direct-plot", elem_classes="wide-plot")
        picked = gr.Textbox(elem_id="patched-head", elem_classes="hidden-input", show_label=False)
        # inside the tab: a State among gr.Tabs' children would count as a tab
        listed_for, stale, patched = gr.State(None), gr.State(0), gr.State(None)
    return InterveneTab(
        tab=tab,
        heads=heads,
        mode=mode,
        add=add,
        ablate=ablate,
        in_views=in_views,
        bars=bars,
        ablation_examples=ablation_examples,
        prompts=(clean, corrupted, answer, distractor),
        patch=patch,
        heatmap=heatmap,
        direct=direct,
        patching_examples=patching_examples,
        picked=picked,
        listed_for=listed_for,
        stale=stale,
        patched=patched,
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


def redraw_if(changed: bool):
    """`stale`'s update: a number it never held when the views must be redrawn (its change event
    redraws them), else left as it is (no event)."""
    return next(_REDRAWS) if changed else gr.skip()


def on_gpu(method, n_outputs: int):
    """A handler that computes: errors become warnings (`guarded`), and on ZeroGPU it runs inside
    `spaces.GPU`, wrapped as the page is built like every other tab's handlers."""
    return gpu(guarded(n_outputs)(method))


class _Events:
    """The tab's handlers, closed over the page they act on; those that compute are wrapped by `on_gpu`
    where they are wired."""

    def __init__(self, tab: InterveneTab, shared: Shared, page: PageParts):
        self.tab, self.shared, self.page = tab, shared, page
        self.workspace = shared.workspace

    def wire(self, runs: list) -> None:
        t, s, p = self.tab, self.shared, self.page
        ablation_inputs = [t.heads, t.mode, t.in_views, s.shown]
        ablation_outputs = [s.status, t.bars, s.shown, t.stale]
        t.ablate.click(on_gpu(self.ablate, 4), ablation_inputs, ablation_outputs, api_name="ablate")
        t.in_views.input(on_gpu(self.toggle, 4), ablation_inputs, ablation_outputs, api_name=False)
        t.add.click(self.add, [t.heads, s.layer, s.head], t.heads, api_name=False)

        patch_inputs = [*t.prompts, p.model]
        patched = [s.status, t.heatmap, t.direct, t.patched]
        t.patch.click(on_gpu(self.patch, 4), patch_inputs, patched, api_name="patch", **COSTLY)
        clicked = t.picked.change(
            self.open_patched,
            [t.picked, t.patched, p.model],
            [s.status, p.prompt, s.layer, s.head, s.shown],
            api_name=False,
            trigger_mode="always_last",
        )

        example_runs = [  # an example loads the model it is meant for, then runs the prompt on screen
            p.run.after(
                examples.load_input_event.then(
                    self.load_for, [p.picker, p.model], p.loader.outputs, api_name=False
                )
            )
            for examples in (t.ablation_examples, t.patching_examples)
        ]
        example_runs[1].then(
            on_gpu(self.patch_example, 4), [*patch_inputs, p.picker], patched, api_name=False, **COSTLY
        )
        runs += [*example_runs, p.run.after(clicked)]
        follow_inputs = [*ablation_inputs, p.model, t.listed_for]
        follow_outputs = [s.status, t.heads, t.listed_for, t.bars, s.shown, t.stale]
        for event in runs:
            event.then(on_gpu(self.follow, 6), follow_inputs, follow_outputs, api_name=False)
        self.redraw_when_stale()

    def redraw_when_stale(self):
        """When a handler changed `shown` (and so `stale`): the views (and the Overview, if open) again.
        A change event of the State's, not a step chained after every run: most runs ablate nothing,
        and then no event is sent at all."""
        s, p = self.shared, self.page

        overview_outputs = [s.status, *p.overview.outputs]

        @gpu
        @guarded(len(overview_outputs))
        def overview_again(is_open, shown):
            if not (is_open and shown):
                return (gr.skip(),) * len(overview_outputs)
            return gr.skip(), *overview.figures(self.workspace.cached_run(*shown))

        self.tab.stale.change(overview_again, [p.overview.is_open, s.shown], overview_outputs, api_name=False)
        self.tab.stale.change(
            p.redraw.fn, p.redraw.inputs, p.redraw.outputs, api_name=False, show_progress_on=s.status
        )

    # --- ablation ---------------------------------------------------------------------------------

    def ablation(self, shown, heads, mode) -> Ablation | None:
        config = self.workspace.explorer(shown[0], load=False).config
        n_heads = config.n_layers * config.n_heads
        if len(heads or ()) > n_heads:
            raise ValueError(f"{len(heads):,} heads were sent to ablate; this model has {n_heads:,}.")
        return Ablation.parse(config, [parse_head(value) for value in heads or ()], mode)

    def ablated(self, shown, ablation: Ablation, in_views: bool):
        """Status, bars, what the views show and whether that changed, for an ablation of the prompt
        on screen."""
        model, text = shown[:2]
        plain, ablated = self.workspace.run(model, text), self.workspace.run(model, text, ablation)
        on_screen = (model, text, ablation) if in_views else (model, text)
        views_show = "the ablated run" if in_views else "the plain run"
        message = f"{str(ablation).capitalize()} in the prompt on screen; the other views show {views_show}."
        bars = plot(views.ablation_next_tokens(plain, ablated))
        return markup.status(message, "info"), bars, on_screen, redraw_if(on_screen != tuple(shown))

    def ablate(self, heads, mode, in_views, shown):
        """The Ablate button (and /ablate): the heads picked, ablated in the prompt on screen."""
        if shown is None:
            raise ValueError("Run a prompt first: the ablation applies to the prompt on screen.")
        ablation = self.ablation(shown, heads, mode)
        if ablation is None:
            raise ValueError(
                "Pick at least one head to ablate (layer.head, e.g. 3.1), or open one and add it."
            )
        return self.ablated(shown, ablation, in_views)

    def toggle(self, heads, mode, in_views, shown):
        """Show the ablated run in the other views, or the plain one again."""
        if shown is None:
            return (gr.skip(),) * 4
        ablation = self.ablation(shown, heads, mode)
        if ablation is None:  # nothing ablated: the views show the plain run
            plain = tuple(shown[:2])
            return gr.skip(), gr.skip(), plain, redraw_if(plain != tuple(shown))
        return self.ablated(shown, ablation, in_views)

    def follow(self, heads, mode, in_views, shown, model, listed_for):
        """After a run: the heads of the loaded model listed (those picked kept where it has them), and
        the heads picked ablated again in the run on screen."""
        picked, choices = heads or [], gr.skip()
        if model != listed_for:
            config = self.workspace.explorer(model, load=False).config
            picked = [value for value in picked if has_head(config, value)]
            choices = gr.Dropdown(choices=head_choices(config), value=picked)
        if shown is None:
            return gr.skip(), choices, model, gr.skip(), gr.skip(), gr.skip()
        ablation = self.ablation(shown, picked, mode)
        if ablation is None:
            return gr.skip(), choices, model, None, gr.skip(), gr.skip()
        status, bars, on_screen, stale = self.ablated(shown, ablation, in_views)
        return status if in_views else gr.skip(), choices, model, bars, on_screen, stale

    @staticmethod
    def add(heads, layer, head):
        """The head on screen joins the heads picked."""
        value = f"{int(layer)}.{int(head)}"
        picked = list(heads or [])
        return picked if value in picked else [*picked, value]

    # --- patching ---------------------------------------------------------------------------------

    def sweep(self, request, clean, corrupted, answer, distractor, model, progress):
        explorer = self.workspace.explorer(model, load=False)
        n = explorer.config.n_layers * explorer.config.n_heads
        progress(0, desc="Running both prompts …")
        told = lambda done: progress(done, desc=f"Patching {n} heads")  # noqa: E731
        cost = limits.patching_cost(explorer.config, PATCH_MAX_TOKENS)
        with self.shared.readings.reading(request, cost):
            result = explorer.patch_heads(clean, corrupted, answer, distractor, told, PATCH_MAX_TOKENS)
        top = ", ".join(f"{layer}.{head} ({value:.2f})" for layer, head, value in result.top_heads(3))
        message = (
            f"Patched each of {n} heads in {result.seconds:.1f} s; the most recovered: {top}. "
            "Beside it, each head's direct effect on the clean prompt. Click a cell to open that head on "
            "the clean prompt."
        )
        run = self.workspace.run(model, clean)  # the clean run the sweep read (cached after the first)
        direct = plot(views.attribution(run, result.answer_id, result.distractor_id), "direct-effect")
        return markup.status(message, "info"), plot(views.patching(result)), direct, (model, clean)

    def patch(self, request: gr.Request, clean, corrupted, answer, distractor, model, progress=gr.Progress()):
        """Patch every head (and /patch): the heatmap of the recovered fraction."""
        return self.sweep(request, clean, corrupted, answer, distractor, model, progress)

    def patch_example(
        self, request: gr.Request, clean, corrupted, answer, distractor, model, choice, progress=gr.Progress()
    ):
        """A patching example's sweep, once its model is loaded (a model that failed to load warned)."""
        if catalog.source_of(choice) != (model or ""):
            return (gr.skip(),) * 4
        return self.sweep(request, clean, corrupted, answer, distractor, model, progress)

    @guarded(5)
    def open_patched(self, choice, patched, model):
        """A click on a heatmap cell: the clean prompt in the prompt box, that layer and head; clearing
        `shown` makes the run that follows draw them even when the clean prompt is on screen."""
        if not choice or patched is None:
            return (gr.skip(),) * 5
        sweep_model, clean = patched
        if sweep_model != model:
            raise ValueError("This heatmap is of another model than the one loaded: patch again.")
        layer, head = (int(part) for part in choice.split(",")[:2])
        config = self.workspace.explorer(model, load=False).config
        if not (0 <= layer < config.n_layers and 0 <= head < config.n_heads):
            raise ValueError(f"There is no layer {layer}, head {head} in this model.")
        return gr.skip(), clean, layer, head, None

    def load_for(self, choice, model, progress=gr.Progress()):
        """An example meant for another model than the loaded one loads it first."""
        outputs = self.page.loader.outputs
        if catalog.source_of(choice) == (model or ""):
            return (gr.skip(),) * len(outputs)
        return guarded(len(outputs))(self.load)(choice, progress)

    def load(self, choice, progress):
        if choice not in [label for label, _ in catalog.choices()]:
            hint = f" `{catalog.SMOLLM2_INSTALL}` installs it." if choice == catalog.SMOLLM2_LABEL else ""
            raise ValueError(f"This example is meant for {choice}, which is not installed here.{hint}")
        return self.page.loader.load(choice, progress)

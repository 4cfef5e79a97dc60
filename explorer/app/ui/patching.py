"""The Intervene tab's patching section: patch every head from a clean prompt into a corrupted one and
see how much of a metric each head brings back (the logit difference, the answer's probability, or KL
from the clean run), its heads ranked beside the map with their direct effect, and the whole sweep to
download as .npz or .csv.

- The prompts start from the prompt on screen when the tab opens with them empty; where it names two
  people, the corrupted prompt swaps them and the answer and distractor are the names ("Swap the two
  names" does it again for the clean prompt typed).
- A sweep computes every metric at once: picking another metric redraws the map and the ranking from
  the sweep on screen (`sweep`: its key, the sweep kept in the workspace's budget), with no new sweep.
- A click on a cell or a ranked head (the charts' `head_picked`, the page asking) puts the
  clean prompt in the prompt box, runs it and opens that layer and head in the Attention tab.
"""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from explorer import views
from explorer.app import limits, markup, prefill
from explorer.app.examples import CORRUPTIONS, PATCHING_EXAMPLES, SWAPS_MODEL
from explorer.app.ui import inputs as checked
from explorer.app.ui import sessions
from explorer.app.ui.common import COSTLY, EACH_TRIGGER, Shared, guarded, head_of, on_gpu, plot, sent
from explorer.app.ui.layer_view import HeadData
from explorer.app.ui.plot_view import PlotView, figure_view
from explorer.app.ui.wiring import named
from explorer.app.visitors import visitor
from explorer.app.workspace import Workspace
from explorer.engine.interventions import PatchResult, single_token
from explorer.engine.lens import Attribution
from explorer.engine.patch_metrics import METRIC_NAMES, METRICS
from explorer.engine.tokens import char_budget, quoted
from explorer.errors import PromptError
from explorer.loading import catalog
from explorer.views import sweep_export
from explorer.views.interventions import corruption

# A sweep batches every head's patch, so its memory grows with L · H · N: the app takes short prompts
# (an IOI pair is ~20 tokens); from Python, patch_heads takes up to the model's context.
PATCH_MAX_TOKENS = 128
PATCHING_INTRO = (
    "### Patch heads\nThe corrupted prompt runs with one head's output taken from the clean run, for "
    "every head in turn: how much of the metric at the last position comes back (1: all of the clean "
    "run's, 0: none): logit(answer) − logit(distractor), p(answer), or the KL divergence of the next "
    "token from the clean run's. The prompts need the same number of tokens; answer and distractor are "
    "single tokens (mind the leading space). Click a cell or a ranked head to open it."
)
# One click downloads, as the Attention tab's (attention.DOWNLOAD_JS): the hidden button is clicked.
DOWNLOAD_JS = "() => { document.querySelector('#sweep-download-file')?.click(); return null; }"
NAMES_LISTED = 5  # a clean prompt that names more people than a swap takes: the first few, named


@dataclass(frozen=True)
class Sweep:
    """The sweep on screen: what it found, the clean prompt's direct effects, the model it ran on."""

    result: PatchResult
    direct: Attribution
    model: str


@dataclass(frozen=True, kw_only=True)
class PatchingSection:
    prompts: tuple[gr.Textbox, gr.Textbox, gr.Textbox, gr.Textbox]  # clean, corrupted, answer, distractor
    swap: gr.Button  # the clean prompt's two names swapped into the corrupted one
    metric: gr.Radio  # what recovered is the fraction of
    patch: gr.Button
    heatmap: PlotView  # recovered fraction, layers × heads: each head's total effect
    ranked: gr.HTML  # the heads that move the metric most either way, with their direct effects
    direct: PlotView  # the clean prompt's direct logit attribution, beside it
    examples: gr.Examples
    patched: gr.State  # (model source, clean prompt) of the heatmap on screen
    sweep: gr.State  # the key of the Sweep on screen, kept in the workspace (`ui.sessions`)
    npz: gr.Button
    csv: gr.Button
    download: gr.DownloadButton  # hidden: the file the page downloads at once


def build(prompt: gr.Textbox, picker: gr.Dropdown, workspace: Workspace) -> PatchingSection:
    gr.Markdown(PATCHING_INTRO)
    with gr.Row():
        clean = gr.Textbox(label="Clean prompt", lines=2, elem_id="patch-clean", min_width=260)
        corrupted = gr.Textbox(
            label="Corrupted prompt (as many tokens)", lines=2, elem_id="patch-corrupted", min_width=260
        )
    with gr.Row():
        answer = gr.Textbox(label="Answer (one token)", elem_id="patch-answer", min_width=140)
        distractor = gr.Textbox(label="Distractor (one token)", elem_id="patch-distractor", min_width=140)
        swap = gr.Button("Swap the two names", elem_id="patch-swap", min_width=140)
    with gr.Row():
        metric = checked.Radio(
            [(METRIC_NAMES[name], name) for name in METRICS],
            value="logit_diff",
            label="Recovered fraction of",
            elem_id="patch-metric",
            scale=3,
        )
        patch = gr.Button("Patch every head", variant="primary", elem_id="patch-button", min_width=140)
    gr.Markdown(CORRUPTIONS, elem_id="patch-corruptions")
    gr.Markdown(SWAPS_MODEL, elem_classes="swaps-model")
    examples = gr.Examples(
        [[e.clean, e.corrupted, e.answer, e.distractor, e.model] for e in PATCHING_EXAMPLES.values()],
        inputs=[clean, corrupted, answer, distractor, picker],
        example_labels=[e.shows for e in PATCHING_EXAMPLES.values()],
        label="Patching examples",
        elem_id="patching-examples",
    )
    with gr.Row():
        heatmap = figure_view(elem_id="patching-plot", scale=3)
        ranked = gr.HTML(elem_id="ranked-heads", min_width=300)
    direct = figure_view(elem_id="patching-direct-plot")
    with gr.Row():
        npz = gr.Button("The sweep (.npz)", size="sm", elem_id="sweep-npz")
        csv = gr.Button("The sweep (.csv)", size="sm", elem_id="sweep-csv")
    download = gr.DownloadButton(elem_id="sweep-download-file", elem_classes="hidden-input")
    patched, sweep = gr.State(None), sessions.result_state(workspace)
    return PatchingSection(
        prompts=(clean, corrupted, answer, distractor),
        swap=swap,
        metric=metric,
        patch=patch,
        heatmap=heatmap,
        ranked=ranked,
        direct=direct,
        examples=examples,
        patched=patched,
        sweep=sweep,
        npz=npz,
        csv=csv,
        download=download,
    )


def ranked(sweep: Sweep, metric: str) -> str:
    """The sweep's heads that move `metric` most either way, and the tokens its corrupted prompt
    changes, as the table beside the map shows them."""
    rows = views.ranked_heads(sweep.result, sweep.direct.heads, metric)
    return markup.ranked_heads(rows, METRIC_NAMES[metric], corruption(sweep.result))


def first_token(tokenizer, text: str) -> str:
    """`text` when it is one token of the vocabulary, else '' (a prefilled answer must be one)."""
    try:
        single_token(tokenizer, text, "answer")
    except PromptError:
        return ""
    return text


class PatchingEvents:
    """The section's handlers, closed over the page they act on (`page`: the tab's
    `intervene.PageParts`, what its events reach outside it)."""

    def __init__(self, section: PatchingSection, shared: Shared, page):
        self.section, self.shared, self.page = section, shared, page
        self.workspace = shared.workspace
        self.downloads = shared.downloads  # the page's one: a visitor keeps one download of any kind

    def wire(self, tab: gr.Tab, runs: list, load_for) -> None:
        """Wire the section's events; the runs they start join `runs`. `load_for` loads an example's
        model first (the tab's)."""
        s, p, shared = self.section, self.page, self.shared
        prompts = dict(zip(("clean", "corrupted", "answer", "distractor"), s.prompts, strict=True))
        patch_inputs = {**prompts, "model": p.model}
        drawn = [shared.status, s.heatmap, s.direct, s.ranked, s.patched, s.sweep]
        patch = named(on_gpu(self.patch, shared.status), patch_inputs)
        swept = s.patch.click(*patch, drawn, api_name="patch", **COSTLY)
        redrawn = [shared.status, s.heatmap, s.ranked]
        on_screen = {"key": s.sweep, "patched": s.patched, "metric": s.metric}
        after_sweep = {**on_screen, "after_sweep": gr.State(True)}
        swept.then(*named(self.metric_shown(), after_sweep), redrawn, api_name=False)
        s.metric.input(*named(self.metric_shown(), on_screen), redrawn, api_name=False)
        s.swap.click(
            *named(guarded(shared.status)(self.swap), {"clean": prompts["clean"], "model": p.model}),
            [shared.status, *s.prompts[1:]],
            api_name=False,
        )
        # queue=False: the boxes fill as the tab opens, before a click on an example can fill them
        tab.select(
            *named(self.prefill, {"prompt": p.prompt, **patch_inputs}),
            list(s.prompts),
            api_name=False,
            queue=False,
        )
        clicked = gr.on(  # a cell of either chart, or a ranked head (the page asks through the map)
            [s.heatmap.head_picked, s.direct.head_picked],
            *named(guarded(shared.status)(self.open_patched), {"patched": s.patched, "model": p.model}),
            [shared.status, p.prompt, shared.layer, shared.head, shared.shown],
            api_name=False,
            **EACH_TRIGGER,
        )
        loaded = named(load_for, {"choice": p.picker, "model": p.model})
        example_run = p.run.after(s.examples.load_input_event.then(*loaded, p.loader.outputs, api_name=False))
        example_run.then(
            *named(on_gpu(self.patch_example, shared.status), {**patch_inputs, "choice": p.picker}),
            drawn,
            api_name=False,
            **COSTLY,
        ).then(*named(self.metric_shown(), after_sweep), redrawn, api_name=False)
        runs += [example_run, p.run.after(clicked)]
        for button, write in ((s.npz, sweep_export.write_sweep_npz), (s.csv, sweep_export.write_sweep_csv)):
            button.click(
                *named(on_gpu(self.exporter(write), shared.status), {"key": s.sweep, "patched": s.patched}),
                [shared.status, s.download],
                api_name=False,
            ).then(None, None, s.download, js=DOWNLOAD_JS, api_name=False)

    # --- the sweep ------------------------------------------------------------------------------------

    def sweep(self, request, clean, corrupted, answer, distractor, model) -> dict:
        explorer = self.workspace.explorer(model, load=False)
        n = explorer.config.n_layers * explorer.config.n_heads
        cost = limits.patching_cost(explorer.config, PATCH_MAX_TOKENS)
        with self.shared.readings.reading(request, cost):
            result = explorer.patch_heads(clean, corrupted, answer, distractor, None, PATCH_MAX_TOKENS)
        message = (
            f"Patched each of {n} heads in {result.seconds:.1f} s: the heads ranked beside the map, each "
            "head's direct effect on the clean prompt under it."
        )
        run = self.workspace.run(model, clean)  # the clean run the sweep read (cached after the first)
        direct = run.logit_attribution(result.answer_id, result.distractor_id)
        sweep = Sweep(result, direct, model)
        key = sessions.keep(self.workspace, request, "sweep", sweep)
        figure = views.attribution(run, result.answer_id, result.distractor_id)
        s = self.section
        return {
            self.shared.status: markup.status(message, "info"),
            s.heatmap: plot(views.patching(result)),
            s.direct: plot(figure, "direct-effect"),
            s.ranked: ranked(sweep, "logit_diff"),
            s.patched: (model, clean),
            s.sweep: key,
        }

    def patch(self, request: gr.Request, clean, corrupted, answer, distractor, model):
        """Patch every head (and /patch): the heatmap of the recovered fraction."""
        return self.sweep(request, clean, corrupted, answer, distractor, model)

    def patch_example(self, request: gr.Request, clean, corrupted, answer, distractor, model, choice):
        """A patching example's sweep, once its model is loaded (a model that failed to load warned)."""
        if catalog.source_of(choice) != (model or ""):
            return {}
        return self.sweep(request, clean, corrupted, answer, distractor, model)

    def on_screen(self, key, patched) -> Sweep | None:
        """The sweep on screen, None before one is drawn (nothing `patched`), or why it is gone."""
        return sessions.on_screen(
            self.workspace, key, patched is not None, "The sweep", "Patch every head again."
        )

    def metric_shown(self):
        """`show_metric` for one event: its errors on the status line, and a function of its own (each
        event's calls are counted apart in the queue: `explorer.app.fair_queue`)."""
        return guarded(self.shared.status)(self.show_metric)

    def show_metric(self, key, patched, metric, after_sweep: bool = False):
        """The map and the ranking for another metric, from the sweep on screen (after a sweep, which
        drew the logit difference's: only for another metric)."""
        if metric not in METRICS or (after_sweep and metric == "logit_diff"):
            return sent({})
        sweep = self.on_screen(key, patched)
        if sweep is None:
            return sent({})
        s = self.section
        return {s.heatmap: plot(views.patching(sweep.result, metric)), s.ranked: ranked(sweep, metric)}

    def exporter(self, write):
        """A handler writing the sweep on screen with `write` into a file of its own, for the page."""
        suffix = ".npz" if write is sweep_export.write_sweep_npz else ".csv"

        def export(request: gr.Request, key, patched):
            sweep = self.on_screen(key, patched)
            if sweep is None:
                raise ValueError("Patch every head first: the download is the sweep on screen.")
            size, what = sweep_export.sweep_bytes(sweep.result), "The patching sweep"
            asking = visitor(request, self.workspace.policy.proxies)
            path = self.downloads.path(asking, f"patching{suffix}", size, what)
            return {self.section.download: str(write(sweep.result, sweep.direct, path))}

        return export

    # --- the prompts ----------------------------------------------------------------------------------

    def read_part(self, text: str) -> str:
        """What a run reads of `text` (`tokens.char_budget` of the app's tokens per run): the prompts
        are cut to it before anything reads them, so a pasted megabyte costs no more than a long prompt."""
        return text[: char_budget(self.workspace.policy.max_tokens)]

    def prefill(self, prompt, clean, corrupted, answer, distractor, model):
        """The tab opened: empty prompts start from the prompt on screen (as a run reads it), its names
        swapped. Outside the queue, so linear in what it reads (`prefill`) and bounded (`read_part`)."""
        clean_box, corrupted_box = self.section.prompts[:2]
        if clean or corrupted or not isinstance(prompt, str):
            return sent({})
        prompt = self.read_part(prompt)
        if not prompt.strip():
            return sent({})
        swap = prefill.swap_names(prompt)
        if swap is None:
            return {clean_box: prompt}
        return {
            clean_box: prompt,
            corrupted_box: swap.corrupted,
            **self.names(swap, model, answer, distractor),
        }

    def swap(self, clean, model):
        """ "Swap the two names": the clean prompt's names swapped into the corrupted prompt."""
        clean = self.read_part(clean if isinstance(clean, str) else "")
        swap = prefill.swap_names(clean)
        if swap is None:
            found = prefill.names(clean)
            listed = ", ".join(map(quoted, found[:NAMES_LISTED]))
            listed += ", …" if len(found) > NAMES_LISTED else ""
            raise ValueError(
                f"The clean prompt names {len(found):,} people ({listed or 'none'}): a swap needs "
                "two (a capitalised word that does not start a sentence is a name)."
            )
        return {self.section.prompts[1]: swap.corrupted, **self.names(swap, model, "", "")}

    def names(self, swap: prefill.Swap, model, answer, distractor) -> dict:
        """The answer (the name said once) and distractor (said twice) with their leading space, where
        each is one token of the loaded model and the box is empty."""
        tokenizer = self.workspace.explorer(model, load=False).tokenizer
        boxes = self.section.prompts[2:]
        found = {
            box: first_token(tokenizer, f" {name}")
            for box, typed, name in zip(
                boxes, (answer, distractor), (swap.said_once, swap.said_twice), strict=True
            )
            if not typed
        }
        return {box: name for box, name in found.items() if name}

    def open_patched(self, patched, model, asked: HeadData):
        """A click on a heatmap cell or a ranked head: the clean prompt in the prompt box, that layer and
        head; clearing `shown` makes the run that follows draw them even when the clean prompt is on
        screen."""
        if asked.layer is None or patched is None:
            return {}
        sweep_model, clean = patched
        if sweep_model != model:
            raise ValueError("This heatmap is of another model than the one loaded: patch again.")
        config = self.workspace.explorer(model, load=False).config
        layer, head = head_of(config.n_layers, config.n_heads, asked.layer, asked.head)
        p, shared = self.page, self.shared
        return {p.prompt: clean, shared.layer: layer, shared.head: head, shared.shown: None}

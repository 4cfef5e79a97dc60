"""The Generate tab: new tokens after the prompt, streamed one step at a time from the KV cache.

Generate streams each step as it comes (a Gradio generator, the API endpoint `/generate`): the text so
far, the chosen layer and head's rows of the new tokens over the context (a row a step), the step's
candidates, and the KV cache at its current length beside the same model as MHA and MQA; the figures at
most every FIGURE_INTERVAL_S, the text every step, with the time left at the pace so far. Stop ends it
after the step being taken and draws every step taken. The generation stays in the workspace (bounded by
bytes), so the step slider (look back at an earlier step) and a layer or head switch redraw from it
without running the model; "Show in every view" hands its sequence, as a Run, to every other tab.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import gradio as gr

from explorer.app import markup
from explorer.app.jobs import time_left
from explorer.app.kept import GenerationKey
from explorer.app.ui import inputs as checked
from explorer.app.ui import steer
from explorer.app.ui.common import Follower, Handler, Shared, gpu, guarded, plot, top
from explorer.app.ui.plot_view import PlotView, figure_view
from explorer.app.ui.wiring import named
from explorer.engine.generate import Generation
from explorer.engine.tokens import printable
from explorer.views import generation as generation_views

MAX_NEW_TOKENS = 256
# A stream sends its figures at most this often (its text every step): a browser needs about this long to
# draw them, and a model on a GPU takes a step far faster.
FIGURE_INTERVAL_S = 0.25
INTRO = (
    "New tokens after the prompt above, one at a time from the KV cache: the rows of the layer and head "
    "chosen above grow as they arrive."
)
STOP_REASONS = {
    "eos": "the model wrote its end-of-sequence token",
    "context": "the model's context is full",
    "max_tokens": "the sequence reached the most tokens a run may have here",
    "max_new_tokens": "it reached the most new tokens asked for",
    None: "Stop ended it after the step under way",
}


@dataclass
class Chosen:
    """The layer and head a stream draws, the generation it makes, and the one Stop ended. A State
    reaches every handler of its session as the same object, so a layer or head switch while tokens
    stream changes the rows drawn from the next step on, and Stop reaches the stream under way."""

    layer: int = 0
    head: int = 0
    streaming: GenerationKey | None = None
    stopped: GenerationKey | None = None


@dataclass(frozen=True, kw_only=True)
class GenerateTab:
    tab: gr.Tab
    settings: tuple  # max new tokens, temperature, top-k, top-p, seed
    generate: gr.Button
    stop: gr.Button
    show: gr.Button  # the generated sequence in every other view
    text: gr.Textbox  # the new tokens as text
    step: gr.Slider  # the step looked at, 0-based
    rows: PlotView  # the new tokens' rows of the chosen layer and head, over the context
    candidates: PlotView  # the step's most likely next tokens
    kv_cache: PlotView  # the live cache's bytes beside MHA and MQA
    generated: gr.State  # this session's GenerationKey, or None
    follower: Follower  # the rows (and the head a stream draws) follow the layout's layer and head
    steer: steer.SteerPanel

    def show_with(self, shared: Shared, run_views: Handler):
        """Wire "Show in every view" to the page's run handler `run_views`, with the generation's key
        as the prompt it takes (`text`): the workspace hands back the generated Run (no forward)."""

        @guarded(shared.status)
        def say_shown(generated, model, shown):
            if generated is None or shown != (model, generated):
                return {}
            with shared.workspace.generation(generated) as generation:
                n_tokens, n_new = len(generation.ids), len(generation.steps)
            message = f"Every view shows the generated sequence ({n_tokens} tokens, {n_new} of them new)"
            return {shared.status: markup.status(f"{message}; Run goes back to the prompt alone.", "info")}

        inputs = run_views.inputs | {"text": self.generated}  # (the API's order stays the run's)
        show = self.show.click(
            *named(run_views.fn, inputs),
            run_views.outputs,
            api_name="show_generation",
            show_progress_on=shared.status,
        )
        said = {"generated": self.generated, "model": inputs["model"], "shown": shared.shown}
        return show.then(*named(say_shown, said), [shared.status], api_name=False)


def new_tokens(n: int, seconds: float) -> str:
    """How many new tokens, and how fast the model took them: "3 new tokens, 41.2 tokens/s"."""
    return f"{n} new token{'' if n == 1 else 's'}, {n / max(seconds, 1e-9):.1f} tokens/s"


def step_figures(generation: Generation, layer: int, head: int, n_steps: int | None = None) -> tuple:
    """The rows of the first `n_steps` steps (all: None), the last one's candidates, and the KV cache as
    it stood then."""
    n_steps = generation_views.clamp_steps(generation, n_steps)
    return (
        plot(generation_views.generation_map(generation, layer, head, n_steps)),
        plot(generation_views.step_candidates(generation.steps[n_steps - 1])),
        plot(generation_views.generation_kv_cache(generation, n_steps)),
    )


SETTINGS = ("max_new_tokens", "temperature", "top_k", "top_p", "seed")  # `GenerateTab.settings`, by name


def settings_of(max_new_tokens, temperature, top_k, top_p, seed) -> dict:
    """The controls as `Explorer.generate` takes them: top-k 0 and top-p 1 mean none (the engine checks
    the ranges)."""
    return dict(
        max_new_tokens=int(max_new_tokens),
        temperature=float(temperature),
        top_k=int(top_k) if top_k else None,
        top_p=None if top_p is None or float(top_p) >= 1 else float(top_p),
        seed=int(seed or 0),
    )


def build(shared: Shared, prompt: gr.Textbox, model: gr.State) -> GenerateTab:
    workspace = shared.workspace
    with gr.Tab("Generate", id="generate", elem_id="tab-generate") as tab:
        chosen = gr.State(Chosen())  # inside the tab: a State among gr.Tabs' children would count as a tab
        generated = gr.State(None)
        gr.Markdown(INTRO, elem_id="generate-intro")
        with gr.Row():
            settings = (
                checked.Slider(
                    1, MAX_NEW_TOKENS, value=32, step=1, label="Max new tokens", elem_id="max-new-tokens"
                ),
                checked.Slider(
                    0, 2, value=0, step=0.05, label="Temperature (0: greedy)", elem_id="temperature"
                ),
                checked.Number(0, label="Top-k (0: off)", precision=0, minimum=0, elem_id="top-k"),
                checked.Slider(0.05, 1, value=1, step=0.05, label="Top-p (1: off)", elem_id="top-p"),
                checked.Number(0, label="Seed", precision=0, elem_id="seed"),
            )
        with gr.Row():
            generate = gr.Button("Generate", variant="primary", elem_id="generate-button")
            stop = gr.Button("Stop", variant="stop", interactive=False, elem_id="stop-button")  # while idle
            show = gr.Button("Show in every view", interactive=False, elem_id="show-generation")
        text = gr.Textbox(label="Generated text", lines=3, interactive=False, elem_id="generated-text")
        step = checked.PositionSlider(
            0, 1, value=0, step=1, label="Step (look back at an earlier one)", elem_id="step-slider"
        )
        rows = figure_view(elem_id="generation-plot")
        candidates = figure_view(elem_id="candidates-plot")
        kv_cache = figure_view(elem_id="generation-kv-plot")
        steering = steer.build(shared, prompt, model)

    figures = [rows, candidates, kv_cache]
    stream_outputs = [shared.status, text, *figures, step, generated, show, stop]

    def drawn_steps(generation: Generation, layer: int, head: int, n_steps: int | None = None) -> dict:
        return dict(zip(figures, step_figures(generation, layer, head, n_steps), strict=True))

    @gpu
    @guarded(shared.status)
    def stream(prompt, model, layer, head, max_new_tokens, temperature, top_k, top_p, seed, chosen):
        chosen.layer, chosen.head = int(layer), int(head)
        key = workspace.generate(
            model, prompt, **settings_of(max_new_tokens, temperature, top_k, top_p, seed)
        )
        chosen.streaming = key
        drawn_at, drawn = -math.inf, 0  # when the figures were last sent, and of how many steps
        started = time.monotonic()
        for new in workspace.steps(key):
            with workspace.generation(key) as generation:  # read before the next step is taken
                if chosen.stopped == key:
                    break  # this step, taken while Stop came, goes with the last update
                taken = len(generation.steps)
                planned = min(generation.max_new_tokens, generation.max_tokens - generation.n_prompt)
                message = (
                    f"Step {new.index}: “{printable(new.token)}” (probability {new.probability:.2f}); "
                    f"{new_tokens(taken, generation.seconds)}; "
                    f"{time_left(time.monotonic() - started, taken / max(planned, 1))} (Stop ends it)."
                )
                draw = time.monotonic() - drawn_at >= FIGURE_INTERVAL_S
                update = {
                    shared.status: markup.status(message, "info"),
                    text: generation_views.generated_text(generation),
                    **(drawn_steps(generation, chosen.layer, chosen.head) if draw else {}),
                    step: gr.update(maximum=top(taken), value=new.index),
                    generated: key,
                    show: gr.Button(interactive=False),
                    stop: gr.Button(interactive=True),  # while it streams
                }
            if draw:
                drawn_at, drawn = time.monotonic(), taken
            yield update
        with workspace.generation(key) as generation:
            n, seconds, reason = len(generation.steps), generation.seconds, generation.stop_reason
            written = generation_views.generated_text(generation)
            last = drawn_steps(generation, chosen.layer, chosen.head) if drawn < n else {}
        message = (
            f"{new_tokens(n, seconds)} ({seconds:.2f} s in the model): "
            f"{STOP_REASONS[reason]}. The step slider looks back; Show in every view opens the sequence "
            "in the other tabs."
        )
        yield last | {
            shared.status: markup.status(message, "info"),
            text: written,
            step: gr.update(maximum=top(n), value=n - 1),
            generated: key,
            show: gr.Button(interactive=n > 0),
            stop: gr.Button(interactive=False),
        }

    def stopped(chosen):
        """Stop: the stream ends after the step under way and sends every step taken itself, so nothing
        it sends can arrive after a Stop of its own (Gradio's `cancels=` drops the stream's last
        update, and a step serialized while Stop ran could still land after Stop's figures)."""
        chosen.stopped = chosen.streaming

    @guarded(shared.status)
    def look_back(index, layer, head, generated):
        if generated is None:
            return {}
        with workspace.generation(generated) as generation:
            if not generation.steps:
                return {}
            return drawn_steps(generation, int(layer), int(head), int(index) + 1)

    def follow(layer, head, index, generated, model, chosen):
        """A layer or head switch: a generation streaming now draws that head from its next step on,
        and the rows on screen are redrawn for it."""
        chosen.layer, chosen.head = layer, head
        if generated is None or generated.model != workspace.key(model) or generated not in workspace:
            return {}  # nothing generated yet, by a model no longer loaded, or dropped since
        with workspace.generation(generated) as generation:
            if not generation.steps:
                return {}
            n_steps = generation_views.clamp_steps(generation, int(index) + 1)
            return {rows: plot(generation_views.generation_map(generation, layer, head, n_steps))}

    picked = {"layer": shared.layer, "head": shared.head}
    inputs = {"prompt": prompt, "model": model, **picked, **dict(zip(SETTINGS, settings, strict=True))}
    generate.click(*named(stream, inputs | {"chosen": chosen}), stream_outputs, api_name="generate").then(
        lambda: gr.Button(interactive=False), None, stop, api_name=False, queue=False
    )  # Stop is disabled again however the stream ended (an error, too)
    stop.click(stopped, [chosen], None, api_name=False)
    step.input(
        *named(look_back, {"index": step, **picked, "generated": generated}),
        [shared.status, *figures],
        api_name="generation_step",
        trigger_mode="always_last",
    )
    follower = Follower(
        {"index": step, "generated": generated, "model": model, "chosen": chosen}, [rows], follow
    )

    @guarded(shared.status)
    def opened(layer, head, **values):
        """The tab opened: its rows follow a layer or head set while it was closed (by a link, or a
        head opened from the Intervene tab)."""
        return follow(int(layer), int(head), **values)

    tab.select(*named(opened, picked | follower.inputs), [shared.status, rows], api_name=False)
    return GenerateTab(
        tab=tab,
        settings=settings,
        generate=generate,
        stop=stop,
        show=show,
        text=text,
        step=step,
        rows=rows,
        candidates=candidates,
        kv_cache=kv_cache,
        generated=generated,
        follower=follower,
        steer=steering,
    )

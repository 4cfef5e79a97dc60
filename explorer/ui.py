"""Gradio layout and event wiring only: figures come from `explorer.views`, HTML from `explorer.markup`,
runs from the shared `Workspace`.

Events: Run (or an example) runs the prompt: one fast forward per (model, prompt). A layer switch
re-sends the head's and the layer's figures (one eager layer at most, never a forward), a head switch
the head's alone, the RoPE positions two figures; the Overview is computed when its tab is opened.
A rejected input warns and leaves what is on screen in place.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass

import gradio as gr
from gradio.components.plot import PlotData

from explorer import markup, views
from explorer.cache import Workspace
from explorer.checkpoints import CheckpointError
from explorer.examples import EXAMPLES, SHAKESPEARE_LINE
from explorer.run import Explorer
from explorer.tokens import PromptError

log = logging.getLogger(__name__)

MODEL_PLACEHOLDER = (
    "empty: the bundled model · or a local directory, or a hub id like HuggingFaceTB/SmolLM2-135M"
)

try:  # ZeroGPU Spaces: GPU work runs inside functions wrapped by spaces.GPU
    import spaces

    gpu = spaces.GPU
except ImportError:

    def gpu(fn):
        return fn


def plot(fig) -> PlotData:
    return PlotData(**views.plot_payload(fig))


def top(count: int) -> int:
    """A slider's maximum over `count` items (Gradio needs maximum > minimum, even for one item)."""
    return max(count - 1, 1)


def guarded(n_outputs: int):
    """Turn an error into a warning and a status message (the first output), leaving every other
    output as it is; a person never sees a stack trace and the app stays up."""

    def decorate(handler):
        @functools.wraps(handler)
        def wrapper(*args, **kwargs):
            try:
                return handler(*args, **kwargs)
            except (PromptError, CheckpointError, ValueError) as error:
                message = str(error)
            except Exception as error:
                log.exception("handler %s failed", handler.__name__)
                message = f"Something went wrong ({type(error).__name__}); the views on screen are unchanged."
            gr.Warning(message)
            return markup.status(message, "warning"), *(gr.skip() for _ in range(n_outputs - 1))

        return wrapper

    return decorate


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
    try:
        startup, startup_message = ModelPanel.of(workspace.explorer("")), ""
    except CheckpointError as error:
        startup, startup_message = ModelPanel(), f"The default model could not be loaded: {error}"

    with gr.Blocks(title="Attention Explorer") as demo:
        model = gr.State("")  # what the model field held when it last loaded
        shown = gr.State(None)  # (model, prompt) of the views on screen
        overview_open = gr.State(False)

        gr.Markdown(
            "# Attention Explorer\nType a prompt and see how a Llama-family transformer attends: "
            "Q·Kᵀ, the 1/√d scaling, the causal mask, the softmax, RoPE and grouped-query heads. "
            "The model runs once through the fast SDPA path; the layer you look at is rerun step by step."
        )
        with gr.Row():
            with gr.Column(scale=3):
                prompt = gr.Textbox(
                    value=SHAKESPEARE_LINE, label="Prompt", lines=3, max_lines=12, elem_id="prompt"
                )
                run_button = gr.Button("Run", variant="primary", elem_id="run-button")
                examples = gr.Examples(EXAMPLES, inputs=[prompt], label="Examples", elem_id="examples")
            with gr.Column(scale=2):
                model_box = gr.Textbox(label="Model", placeholder=MODEL_PLACEHOLDER, elem_id="model-source")
                load_button = gr.Button("Load model", elem_id="load-model")
                model_card = gr.HTML(startup.card, elem_id="model-card")
        status = gr.HTML(markup.status(startup_message, "warning"), elem_id="status")
        token_strip = gr.HTML(elem_id="token-strip")
        with gr.Row():
            layer = gr.Slider(
                0, top(startup.n_layers), value=0, step=1, label="Layer", elem_id="layer-slider"
            )
            head = gr.Dropdown(
                list(startup.heads),
                value=0,
                label="Head (and the kv head it reads)",
                elem_id="head-picker",
            )

        with gr.Tabs(elem_id="views"):
            with gr.Tab("Attention", elem_id="tab-attention") as attention_tab:
                pipeline_plot = gr.Plot(show_label=False, elem_id="pipeline-plot")
                heads_plot = gr.Plot(show_label=False, elem_id="all-heads-plot")
            with gr.Tab("RoPE", elem_id="tab-rope") as rope_tab:
                with gr.Row():
                    angles_plot = gr.Plot(show_label=False, elem_id="rope-angles-plot")
                    wavelengths_plot = gr.Plot(show_label=False, elem_id="rope-wavelengths-plot")
                with gr.Row():
                    query_pos = gr.Slider(
                        0, 1, value=0, step=1, label="Query position m", elem_id="rope-query"
                    )
                    key_pos = gr.Slider(0, 1, value=0, step=1, label="Key position n", elem_id="rope-key")
                rotation_plot = gr.Plot(show_label=False, elem_id="rope-rotation-plot")
                split_plot = gr.Plot(show_label=False, elem_id="rope-split-plot")
            with gr.Tab("GQA", elem_id="tab-gqa") as gqa_tab:
                with gr.Row():
                    gqa_plot = gr.Plot(startup.gqa, show_label=False, elem_id="gqa-plot")
                    similarity_plot = gr.Plot(show_label=False, elem_id="similarity-plot")
                kv_plot = gr.Plot(startup.kv_cache, show_label=False, elem_id="kv-cache-plot")
            with gr.Tab("Faithfulness", elem_id="tab-faithfulness") as faithfulness_tab:
                faithfulness_plot = gr.Plot(show_label=False, elem_id="faithfulness-plot")
            with gr.Tab("Overview", elem_id="tab-overview") as overview_tab:
                overview_plot = gr.Plot(show_label=False, elem_id="overview-plot")
                next_plot = gr.Plot(show_label=False, elem_id="next-tokens-plot")

        other_tabs = [attention_tab, rope_tab, gqa_tab, faithfulness_tab]
        head_plots = [pipeline_plot, rotation_plot, split_plot]
        layer_plots = [heads_plot, similarity_plot, faithfulness_plot]
        run_outputs = [status, token_strip, shown, query_pos, key_pos, angles_plot, wavelengths_plot]
        run_outputs += [*head_plots, *layer_plots, overview_plot, next_plot]
        load_outputs = [status, model, model_card, layer, head, gqa_plot, kv_plot, shown]

        @gpu
        @guarded(len(run_outputs))
        def run_prompt(text, model, layer, head, overview_open, shown):
            if shown == (model, text):
                return (gr.skip(),) * len(run_outputs)
            cached = workspace.cached_run(model, text)
            run = cached.run
            message = f"{run.n_tokens} tokens, one fast forward in {run.forward_seconds * 1e3:.0f} ms."
            if run.truncated:
                message = (
                    f"The prompt is longer than the model's context: it was truncated to its first "
                    f"{run.n_tokens} tokens ({run.n_dropped} left out)."
                )
                gr.Warning(message)
            layer, head = int(layer), int(head)
            query, key = views.default_positions(run)
            figures = views.head_figures(run, layer, head, query, key) + views.layer_figures(run, layer)
            overview = _overview(cached) if overview_open else (None, None)
            return (
                markup.status(message, "warning" if run.truncated else "info"),
                markup.token_strip(run.tokens, run.n_dropped),
                (model, text),
                gr.Slider(maximum=top(run.n_tokens), value=query),
                gr.Slider(maximum=top(run.n_tokens), value=key),
                plot(views.rope_angles(run)),
                plot(views.rope_wavelengths(run)),
                *(plot(fig) for fig in figures),
                *overview,
            )

        @gpu
        @guarded(1 + len(head_plots) + len(layer_plots))
        def switch_layer(layer, head, query, key, shown):
            if shown is None:
                return (gr.skip(),) * (1 + len(head_plots) + len(layer_plots))
            run = workspace.run(*shown)
            layer, head, query, key = int(layer), int(head), int(query), int(key)
            figures = views.head_figures(run, layer, head, query, key) + views.layer_figures(run, layer)
            return gr.skip(), *(plot(fig) for fig in figures)

        @gpu
        @guarded(1 + len(head_plots))
        def switch_head(layer, head, query, key, shown):
            if shown is None:
                return (gr.skip(),) * (1 + len(head_plots))
            run = workspace.run(*shown)
            figures = views.head_figures(run, int(layer), int(head), int(query), int(key))
            return gr.skip(), *(plot(fig) for fig in figures)

        @gpu
        @guarded(3)
        def move_positions(layer, head, query, key, shown):
            if shown is None:
                return gr.skip(), gr.skip(), gr.skip()
            run = workspace.run(*shown)
            layer, head, query, key = int(layer), int(head), int(query), int(key)
            return (
                gr.skip(),
                plot(views.rope_rotation(run, layer, head, query, key)),
                plot(views.rope_score_split(run, layer, head, query, key)),
            )

        def _overview(cached) -> tuple[PlotData, PlotData]:
            if cached.profile is None:
                cached.profile = views.head_profile(cached.run)
            return plot(views.overview(cached.run, cached.profile)), plot(views.next_tokens(cached.run))

        @gpu
        @guarded(4)
        def open_overview(shown):
            if shown is None:
                return gr.skip(), True, gr.skip(), gr.skip()
            return gr.skip(), True, *_overview(workspace.cached_run(*shown))

        @guarded(len(load_outputs))
        def load_model(source, progress=gr.Progress()):
            progress(0, desc=f"Loading {source.strip() or 'the bundled model'} …")
            explorer = workspace.explorer(source)
            panel = ModelPanel.of(explorer)
            return (
                markup.status(f"Loaded {explorer.name}.", "info"),
                source.strip(),
                panel.card,
                gr.Slider(maximum=top(panel.n_layers), value=0),
                gr.Dropdown(choices=list(panel.heads), value=0),
                panel.gqa,
                panel.kv_cache,
                None,
            )

        run_inputs = [prompt, model, layer, head, overview_open, shown]
        view_inputs = [layer, head, query_pos, key_pos, shown]
        gr.on([run_button.click, prompt.submit], run_prompt, run_inputs, run_outputs, api_name="run")
        examples.load_input_event.then(run_prompt, run_inputs, run_outputs, api_name=False)
        layer.input(
            switch_layer,
            view_inputs,
            [status, *head_plots, *layer_plots],
            api_name="layer",
            trigger_mode="always_last",  # dragging the slider: compute only where it stops
        )
        head.input(
            switch_head, view_inputs, [status, *head_plots], api_name="head", trigger_mode="always_last"
        )
        gr.on(
            [query_pos.input, key_pos.input],
            move_positions,
            view_inputs,
            [status, rotation_plot, split_plot],
            api_name="positions",
            trigger_mode="always_last",
        )
        overview_tab.select(
            open_overview, [shown], [status, overview_open, overview_plot, next_plot], api_name="overview"
        )
        gr.on([tab.select for tab in other_tabs], lambda: False, None, overview_open, api_name=False)
        load_button.click(load_model, [model_box], load_outputs, api_name="load_model").then(
            run_prompt, run_inputs, run_outputs, api_name=False
        )
        demo.load(run_prompt, run_inputs, run_outputs, api_name=False)
    return demo

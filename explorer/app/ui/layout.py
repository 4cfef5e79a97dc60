"""The page and what every view shares: the prompt, the model picker, layer and head, and the tabs.

Events: Run (or an example, or Enter in the prompt) runs the prompt: one fast forward per (model,
prompt). A layer switch re-sends the head's and the layer's figures (one eager layer at most, never a
forward), a head switch the head's alone; a click on an Overview cell or a head's thumbnail does a
switch too. Each switch is one event: the views of other tabs that follow the layer and head (the
zoom, the generation's rows) are redrawn by the same handler. A link (`?prompt=…&layer=…`) opens that
view. A rejected input warns and leaves what is on screen in place. Each tab wires its own events
(RoPE positions, the Overview, the zoom, downloads; the Intervene tab chains the run and the redraw of
the views after its own); loading a model is `explorer.ui.model_loading`.
"""

from __future__ import annotations

import gradio as gr

from explorer import views
from explorer.app import markup
from explorer.app.examples import EXAMPLE_LABELS, EXAMPLES, SHAKESPEARE_LINE
from explorer.app.policy import Policy
from explorer.app.ui import (
    attention,
    faithfulness,
    generate,
    gqa,
    intervene,
    model_loading,
    overview,
    page,
    rope,
    share,
)
from explorer.app.ui.common import Followers, Handler, Shared, gpu, guarded, index, plot, top
from explorer.app.ui.model_loading import ModelPanel
from explorer.app.workspace import Workspace
from explorer.engine.run import Run
from explorer.engine.tokens import CHARS_PER_TOKEN, char_budget
from explorer.errors import CheckpointError
from explorer.loading import catalog

INTRO = (
    "# Attention Explorer\nType a prompt and see how a Llama-family transformer attends: "
    "Q·Kᵀ, the 1/√d scaling, the causal mask, the softmax, RoPE and grouped-query heads. "
    "The model runs once through the fast SDPA path; the layer you look at is rerun step by step."
)


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


def build_demo(workspace: Workspace | None = None) -> gr.Blocks:
    workspace = workspace or Workspace()
    policy = workspace.policy
    try:
        startup, startup_message = ModelPanel.of(workspace.explorer("")), ""
    except CheckpointError as error:
        startup, startup_message = ModelPanel(), f"The default model could not be loaded: {error}"

    with page.Page(title="Attention Explorer") as demo:
        page.assets()
        model = gr.State("")  # the source of the loaded model ('' is the bundled one)
        shown = gr.State(None)  # (model, prompt) of the views on screen; (…, ablation): ablated
        log_colours = gr.State(False)
        current_tab = gr.State("attention")

        gr.Markdown(INTRO, elem_id="intro")
        with gr.Row():
            with gr.Column(scale=3, min_width=300):
                prompt = gr.Textbox(
                    value=SHAKESPEARE_LINE,
                    label="Prompt (Enter runs it, Shift+Enter starts a new line)",
                    lines=3,
                    max_lines=12,
                    elem_id="prompt",
                )
                run_button = gr.Button("Run", variant="primary", elem_id="run-button")
                examples = gr.Examples(
                    EXAMPLES,
                    inputs=[prompt],
                    example_labels=EXAMPLE_LABELS,
                    label="Examples",
                    elem_id="examples",
                )
            with gr.Column(scale=2, min_width=300):
                picker = gr.Dropdown(
                    [label for label, _ in policy.choices()],
                    value=catalog.BUNDLED_LABEL,
                    allow_custom_value=True,  # typed sources reach the policy, which answers them
                    label="Model",
                    info=model_loading.MODEL_INFO[policy.models],
                    elem_id="model-source",
                )
                load_button = gr.Button("Load model", elem_id="load-model")
                model_card = gr.HTML(startup.card, elem_id="model-card")
        status = gr.HTML(markup.status(startup_message, "warning"), elem_id="status")
        token_strip = gr.HTML(elem_id="token-strip")
        with gr.Row():
            layer = gr.Slider(
                0,
                top(startup.n_layers),
                value=0,
                step=1,
                label="Layer",
                elem_id="layer-slider",
                min_width=200,
            )
            head = gr.Dropdown(
                list(startup.heads),
                value=0,
                label="Head (and the kv head it reads)",
                elem_id="head-picker",
                min_width=200,
            )
        picked = gr.Textbox(elem_id="picked-head", elem_classes="hidden-input", show_label=False)
        shared = Shared(workspace, status, shown, layer, head, log_colours)

        with gr.Tabs(elem_id="views", overflow_behavior="wrap"):
            attention_tab = attention.build(shared)
            rope_tab = rope.build(shared)
            gqa_tab = gqa.build(startup.gqa, startup.kv_cache)
            faithfulness_tab = faithfulness.build()
            overview_tab = overview.build(shared)
            intervene_tab = intervene.build(shared, prompt, picker)
            generate_tab = generate.build(shared, prompt, model)
        all_tabs = [attention_tab.tab, rope_tab.tab, gqa_tab.tab, faithfulness_tab.tab, overview_tab.tab]
        all_tabs += [intervene_tab.tab, generate_tab.tab]
        overview_tab.close_when([tab for tab in all_tabs if tab is not overview_tab.tab])
        for tab, name in zip(all_tabs, share.TABS, strict=True):
            tab.select(lambda name=name: name, None, current_tab, api_name=False)
        with gr.Row():
            copy_link = gr.Button("Copy link to this view", size="sm", scale=0, elem_id="copy-link")
            link = gr.Textbox(show_label=False, interactive=False, elem_id="share-link", scale=3)

        # The order of views.head_figures and views.layer_figures.
        head_plots = [attention_tab.pipeline, rope_tab.rotation, rope_tab.split]
        layer_plots = [attention_tab.all_heads, gqa_tab.similarity, faithfulness_tab.check]
        run_outputs = [status, token_strip, shown, rope_tab.query, rope_tab.key, rope_tab.angles]
        run_outputs += [rope_tab.wavelengths, *head_plots, *layer_plots]
        run_outputs += [overview_tab.profile, overview_tab.next_tokens]
        run_outputs += [*attention_tab.window, attention_tab.zoom]  # the zoom's window moves to the new run
        # Views of other tabs that follow the layer and head, redrawn by the switch's own event.
        followers = Followers((attention_tab.follower(shared), generate_tab.follower))
        switch_outputs = [status, *head_plots, *layer_plots, *followers.outputs]

        @gpu
        @guarded(len(run_outputs))
        def run_prompt(text, model, layer, head, overview_open, shown, log, zoom_open):
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
            figures = views.head_figures(run, layer, head, query, key, log) + views.layer_figures(
                run, layer, log
            )
            return (
                markup.status(message, "warning" if run.truncated else "info"),
                markup.token_strip(run.tokens, run.n_dropped),
                (model, cached.text),  # the text the run read: a session keeps no 50 MB paste
                gr.Slider(maximum=top(run.n_tokens), value=query),
                gr.Slider(maximum=top(run.n_tokens), value=key),
                plot(views.rope_angles(run)),
                plot(views.rope_wavelengths(run)),
                *(plot(fig) for fig in figures),
                *(overview.figures(cached) if overview_open else (None, None)),
                *attention_tab.after_run(run, layer, head, zoom_open, log),
            )

        def layer_figures(layer, head, query, key, shown, log):
            run = workspace.run(*shown)
            layer, head = index(layer, "layer"), index(head, "head")
            query, key = index(query, "query position"), index(key, "key position")
            figures = views.head_figures(run, layer, head, query, key, log) + views.layer_figures(
                run, layer, log
            )
            return [plot(fig) for fig in figures]

        @gpu
        @guarded(len(switch_outputs))
        def switch_layer(layer, head, query, key, shown, log, *followed):
            if shown is None:
                return (gr.skip(),) * len(switch_outputs)
            figures = layer_figures(layer, head, query, key, shown, log)
            layer, head = index(layer, "layer"), index(head, "head")
            return gr.skip(), *figures, *followers.update(layer, head, followed)

        head_outputs = [status, *head_plots, *followers.outputs]

        @gpu
        @guarded(len(head_outputs))
        def switch_head(layer, head, query, key, shown, log, *followed):
            if shown is None:
                return (gr.skip(),) * len(head_outputs)
            run = workspace.run(*shown)
            layer, head = index(layer, "layer"), index(head, "head")
            query, key = index(query, "query position"), index(key, "key position")
            figures = views.head_figures(run, layer, head, query, key, log)
            return gr.skip(), *(plot(fig) for fig in figures), *followers.update(layer, head, followed)

        @gpu
        @guarded(2 + len(switch_outputs))
        def pick(choice, query, key, shown, log, *followed):
            """A click on an Overview cell or a head's thumbnail: "layer,head,nonce" from the page."""
            if shown is None:
                return (gr.skip(),) * (2 + len(switch_outputs))
            layer, head = (int(part) for part in choice.split(",")[:2])
            config = workspace.run(*shown).config
            if not (0 <= layer < config.n_layers and 0 <= head < config.n_heads):
                raise ValueError(f"There is no layer {layer}, head {head} in this model.")
            figures = layer_figures(layer, head, query, key, shown, log)
            return gr.skip(), layer, head, *figures, *followers.update(layer, head, followed)

        @gpu
        @guarded(4)
        def recolour(log, layer, head, shown):
            if shown is None:
                return gr.skip(), log, gr.skip(), gr.skip()
            run = workspace.run(*shown)
            layer, head = index(layer, "layer"), index(head, "head")
            return (
                gr.skip(),
                log,
                plot(views.pipeline(run, layer, head, log)),
                plot(views.all_heads(run, layer, log)),
            )

        run_inputs = [prompt, model, layer, head, overview_tab.is_open, shown, log_colours]
        run_inputs += [attention_tab.zoom_open]
        view_inputs = [layer, head, rope_tab.query, rope_tab.key, shown, log_colours]
        switch_inputs = [*view_inputs, *followers.inputs]
        run_handler = Handler(run_prompt, run_inputs, run_outputs)
        # Progress shows on the status line alone: on every plot, each would run a timer of its own,
        # redrawn every frame while the plots are being drawn.
        progress = dict(show_progress_on=status)
        loader = model_loading.Loader(workspace, picker, [status, model, model_card, layer, head])
        loader.outputs += [gqa_tab.diagram, gqa_tab.kv_cache, shown]
        restored = demo.load(loader.restore, None, [*loader.outputs, picker], api_name=False).then(
            restore_view, None, [prompt, layer, head, current_tab, overview_tab.is_open], api_name=False
        )
        # The link's tab is opened in the page, as a click would: were the tabs an output of any event,
        # Gradio would copy the state of every component inside them at each of every later event's
        # status messages (~15 ms of a layer switch at 256 tokens).
        restored.then(None, js=share.OPEN_TAB_JS)
        runs = [
            gr.on(
                [run_button.click, prompt.submit],
                run_prompt,
                run_inputs,
                run_outputs,
                api_name="run",
                **progress,
            ),
            run_handler.after(examples.load_input_event),
            run_handler.after(loader.on_click(load_button)),
            run_handler.after(restored),
            generate_tab.show_with(shared, run_prompt, run_inputs, run_outputs),
        ]
        layer.input(
            switch_layer,
            switch_inputs,
            switch_outputs,
            api_name="layer",
            trigger_mode="always_last",  # dragging the slider: compute only where it stops
            **progress,
        )
        # A pick in the dropdown: `select`, fired once. Its `input` fires twice (on the pick, and
        # again on the blur that follows it, value unchanged), and a second head switch of 0.8 MB.
        head.select(
            switch_head,
            switch_inputs,
            head_outputs,
            api_name="head",
            trigger_mode="always_last",
            **progress,
        )
        picked.change(
            pick,
            [picked, rope_tab.query, rope_tab.key, shown, log_colours, *followers.inputs],
            [status, layer, head, *head_plots, *layer_plots, *followers.outputs],
            api_name=False,
            trigger_mode="always_last",
            **progress,
        )
        redraw = Handler(switch_layer, switch_inputs, switch_outputs)
        parts = intervene.PageParts(prompt, picker, model, loader, overview_tab, run_handler, redraw)
        intervene_tab.wire(shared, parts, runs)
        attention_tab.log_box.input(
            recolour,
            [attention_tab.log_box, layer, head, shown],
            [status, log_colours, attention_tab.pipeline, attention_tab.all_heads],
            api_name=False,
        )
        copy_link.click(
            share.query_string, [prompt, layer, head, model, current_tab], link, api_name=False
        ).then(None, link, link, js=share.COPY_JS)
    # A bounded queue: past `queue_size` waiting requests, a new one is told the queue is full.
    return demo.queue(max_size=policy.queue_size, default_concurrency_limit=policy.concurrency)


def restore_view(request: gr.Request):
    """The prompt, layer, head and tab a link asks for (each left as it is when the link does not);
    the page itself opens the tab (share.OPEN_TAB_JS)."""
    params = share.requested(request)
    layer, head, tab = share.integer(params, "layer"), share.integer(params, "head"), share.tab_of(params)
    return (
        params.get("prompt", gr.skip()),
        gr.skip() if layer is None else layer,
        gr.skip() if head is None else head,
        gr.skip() if tab is None else tab,
        tab == "overview",
    )

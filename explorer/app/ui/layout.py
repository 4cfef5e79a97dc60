"""The page laid out: the prompt, the model picker, layer and head, the tabs (each a module of its own
that lays out its plots and wires its own events) and the link to the view on screen. What every view
shares (Run, a layer or head switch, a link) is wired by `explorer.app.ui.events`; loading a model by
`explorer.app.ui.model_loading`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import gradio as gr
from gradio.utils import get_upload_folder

from explorer import views
from explorer.app import limits, markup
from explorer.app.downloads import DOWNLOAD_SECONDS, DOWNLOAD_SWEEP_SECONDS, Downloads
from explorer.app.examples import EXAMPLE_LABELS, EXAMPLES, SHAKESPEARE_LINE
from explorer.app.fair_queue import QueueShares
from explorer.app.jobs import Jobs
from explorer.app.limits import Readings
from explorer.app.ui import (
    attention,
    circuit,
    faithfulness,
    flow,
    generate,
    gqa,
    intervene,
    lens,
    looking,
    model_loading,
    overview,
    page,
    rope,
    sessions,
    wiring,
)
from explorer.app.ui import inputs as checked
from explorer.app.ui.common import Controls, Shared, show_progress, top
from explorer.app.ui.events import Tabs, ViewEvents
from explorer.app.ui.model_loading import ModelPanel
from explorer.app.ui.page_wiring import PageWiring
from explorer.app.visitors import visitor
from explorer.app.workspace import Workspace
from explorer.errors import CheckpointError
from explorer.loading import catalog

INTRO = (
    "# Attention Explorer\nType a prompt and see how a Llama-family transformer attends: "
    "Q·Kᵀ, the 1/√d scaling, the causal mask, the softmax, RoPE and grouped-query heads. "
    f"The model runs once through the fast {markup.explained('SDPA')} path; the layer you look at is "
    f"rerun step by step (the {markup.explained('eager')} path)."
)


@dataclass(frozen=True)
class Startup:
    """What the page shows before anything is asked: the default model's panel, or why it failed."""

    panel: ModelPanel
    message: str = ""

    @classmethod
    def of(cls, workspace: Workspace) -> Startup:
        try:
            return cls(ModelPanel.of(workspace.explorer("")))
        except CheckpointError as error:
            return cls(ModelPanel(), f"The default model could not be loaded: {error}")


def build_demo(workspace: Workspace | None = None) -> gr.Blocks:
    workspace = workspace or Workspace()
    startup = Startup.of(workspace)
    policy = workspace.policy
    shares = QueueShares(policy.queue_per_visitor)
    with page.Page(
        title="Attention Explorer",
        shares=shares,
        proxies=policy.proxies,
        delete_cache=(DOWNLOAD_SWEEP_SECONDS, DOWNLOAD_SECONDS),
    ) as demo:
        page.assets()
        controls, shared = lay_out_controls(workspace, startup)
        with gr.Tabs(elem_id="views", overflow_behavior="wrap"):
            tabs = Tabs(
                attention=attention.build(shared),
                rope=rope.build(shared),
                gqa=gqa.build(startup.panel.gqa, startup.panel.kv_cache),
                faithfulness=faithfulness.build(),
                overview=overview.build(shared),
                intervene=intervene.build(shared, controls.prompt, controls.picker),
                generate=generate.build(shared, controls.prompt, controls.model),
                lens=lens.build(),
                flow=flow.build(),
                circuit=circuit.build(workspace),
            )
        with gr.Row():
            copy_link = gr.Button("Copy link to this view", size="sm", scale=0, elem_id="copy-link")
            link = gr.Textbox(show_label=False, interactive=False, elem_id="share-link", scale=3)
        PageWiring(ViewEvents(workspace, shared, controls, tabs, link), demo, copy_link).wire()
        sessions.end_when_closed(demo, workspace, shared.downloads)
        stop_when_asked(shared)
        progress_on_status(demo, shared.status)
        wiring.grouped_by_handler(demo)
        bound_every_request(demo, policy.request_seconds)
    # A bounded queue that every event goes through (api_open=False: no REST call skips it, and with it
    # the fair shares): past `queue_size` waiting requests, a new one is told the queue is full.
    return demo.queue(
        max_size=policy.queue_size, default_concurrency_limit=policy.concurrency, api_open=False
    )


def bound_every_request(demo: gr.Blocks, seconds: float) -> None:
    """Every handler stops once it has computed `seconds` (the policy's bound; 0: none), saying so."""
    for event in demo.fns.values():
        if event.fn is not None:
            event.fn = limits.bounded(event.fn, seconds)


def progress_on_status(demo: gr.Blocks, status: gr.HTML) -> None:
    """Every event shows its progress on the status line alone (past 0.3 s: page.css), as its time and
    its progress bar, without Gradio's spinner. Gradio's page keeps a loading status for each component
    an event shows progress on (by default, its outputs) and, at every status message of every later
    event, looks each such component up in its tree and copies its value back into its props: the
    page's load and the tabs' events had put some 40 components there, plots among them. The spinner
    is animated frame by frame while an event runs, even before it shows: on a page of many plots each
    frame is painted again, on the CPU the handler the page waits for runs on when both share a machine."""
    for event in demo.fns.values():
        if event.fn is None:
            continue
        if event.show_progress_on is None:
            event.show_progress_on = [status]
        if event.show_progress == "full":
            event.show_progress = "minimal"


def stop_when_asked(shared: Shared) -> None:
    """Stop (and /stop) ends the jobs of the page's session under way (`app.jobs`): each stops at its
    next step and says so on the status line, the views on screen staying. Outside the queue, where the
    page's own places may all be taken by the work it stops; it shows no progress of its own."""
    jobs, proxies = shared.jobs, shared.workspace.policy.proxies

    def stop(request: gr.Request) -> None:
        jobs.stop(visitor(request, proxies).session)

    shared.stop.click(
        stop, None, None, api_name="stop", queue=False, show_progress="hidden", show_progress_on=shared.stop
    )


def lay_out_controls(workspace: Workspace, startup: Startup) -> tuple[Controls, Shared]:
    """The intro, the prompt and its examples, the model picker and card, the status line, the token
    strip (a click on a token shows which heads look at it), and the layer and head every view shows."""
    policy, panel = workspace.policy, startup.panel
    model = gr.State("")  # the source of the loaded model ('' is the bundled one)
    shown = gr.State(None)  # (model, prompt) of the views on screen; (…, ablation): ablated
    map_style = gr.State(views.MapStyle())

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
                EXAMPLES, inputs=[prompt], example_labels=EXAMPLE_LABELS, label="Examples", elem_id="examples"
            )
        with gr.Column(scale=2, min_width=300):
            picker = checked.Dropdown(
                [label for label, _ in policy.choices()],
                value=catalog.BUNDLED_LABEL,
                allow_custom_value=True,  # typed sources reach the policy, which answers them
                label="Model",
                info=model_loading.picker_info(policy),
                elem_id="model-source",
            )
            load_button = gr.Button("Load model", elem_id="load-model")
            model_card = gr.HTML(panel.card, elem_id="model-card")
    with gr.Row(equal_height=False):  # Stop at the status line's end, shown by page.css
        status = gr.HTML(markup.status(startup.message, "warning"), elem_id="status")
        stop = gr.Button("Stop", size="sm", variant="stop", scale=0, min_width=90, elem_id="stop-job")
    token_strip = gr.HTML(elem_id="token-strip", js_on_load=looking.TOKEN_CLICK_JS)
    heads_looking_at = looking.build()
    with gr.Row():
        layer = checked.PositionSlider(
            0, top(panel.n_layers), value=0, step=1, label="Layer", elem_id="layer-slider", min_width=200
        )
        head = checked.Dropdown(
            list(panel.heads),
            value=0,
            label="Head (and the kv head it reads)",
            info=f"kv: {markup.GLOSSARY['kv']}.",
            elem_id="head-picker",
            min_width=200,
        )
    current_tab = gr.State("attention")  # the tab on screen, for links: set as a tab opens
    controls = Controls(
        prompt=prompt,
        run_button=run_button,
        examples=examples,
        picker=picker,
        load_button=load_button,
        model_card=model_card,
        token_strip=token_strip,
        model=model,
        current_tab=current_tab,
    )
    jobs = Jobs(show_progress)
    shared = Shared(
        workspace=workspace,
        readings=Readings(workspace, jobs),
        jobs=jobs,
        stop=stop,
        downloads=Downloads(
            Path(get_upload_folder()) / "explorer-downloads",
            workspace.policy.download_bytes,
            workspace.policy.downloads_bytes,
        ),
        status=status,
        shown=shown,
        layer=layer,
        head=head,
        map_style=map_style,
    )
    heads_looking_at.wire(shared, token_strip)
    return controls, shared

"""What every part of the UI shares: the page's shared controls, turning figures into Gradio plot
data, slider bounds, and the guard that turns any error into a warning while the views stay."""

from __future__ import annotations

import functools
import inspect
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass

import gradio as gr
from gradio.components.plot import PlotData

from explorer import views
from explorer.app import markup, payload
from explorer.app.downloads import Downloads
from explorer.app.jobs import Jobs
from explorer.app.limits import Readings
from explorer.app.ui import layer_view, toasts
from explorer.app.ui.wiring import Inputs, named
from explorer.app.workspace import Workspace
from explorer.errors import CheckpointError, LimitError, PromptError, StoppedError

log = logging.getLogger(__name__)


def gpu(fn):
    """On a ZeroGPU Space, GPU work runs inside functions wrapped by `spaces.GPU`; elsewhere as is."""
    try:
        import spaces
    except ImportError:
        return fn
    return spaces.GPU(fn)


def on_gpu(handler, status):
    """A handler that computes: errors become warnings (`guarded`), and on ZeroGPU it runs inside
    `spaces.GPU`, wrapped as the page is built like every other tab's handlers."""
    return gpu(guarded(status)(handler))


def plot(fig, filename: str = "attention-explorer") -> PlotData:
    return PlotData(**payload.plot_payload(fig, filename))


HEAD_FIGURES = ("pipeline", "rope-rotation", "rope-score-split")  # views.head_figures, in order
LAYER_FIGURES = ("all-heads", "head-similarity", "faithfulness")  # views.layer_figures


def plots(figures: list, run, layer: int) -> list[PlotData]:
    """A layer's figures (`views.layer_figures`, as many as given) as plot data, each download named by
    the model, layer and figure."""
    return [
        plot(fig, payload.file_name(run.explorer.name, f"layer{layer}", name))
        for fig, name in zip(figures, LAYER_FIGURES, strict=False)
    ]


def pipeline_plot(run, layer: int, head: int, style: views.MapStyle, thumbnails=None, every_head=False):
    """Head `head`'s pipeline as the layer view's value (`payload.pipeline_payload`: marked with what the
    view asks the other heads by once drawn, or with `every_head` carrying them while they fit), each
    download named by the model, layer, head and figure; with the layer's thumbnails where given (their
    plot data: `plots`)."""
    sent = payload.pipeline_payload(run, layer, head, style, pipeline_names(run, layer), every_head)
    thumbnails = None if thumbnails is None else thumbnails.plot
    return layer_view.layer_value(
        sent,
        layer=layer,
        head=head,
        n_layers=run.config.n_layers,
        view=payload.view_key(run, style),
        thumbnails=thumbnails,
    )


def layer_view_value(run, layer: int, head: int, style: views.MapStyle, every_head=False) -> dict:
    """Layer `layer`'s whole value for the layer view: head `head`'s pipeline (`pipeline_plot`) and every
    head's thumbnails."""
    (thumbnails,) = plots([views.all_heads(run, layer, style)], run, layer)
    return pipeline_plot(run, layer, head, style, thumbnails, every_head)


def neighbour_values(
    run, layer: int, head: int, asked: list[int], style: views.MapStyle, budget: int
) -> list[dict]:
    """The layer view's values (`layer_view_value`, head `head`, every head while they fit) of the
    layers `asked` that are beside `layer` in the model, in order, while their JSON fits `budget` bytes:
    the layers the page keeps to step to with no request. Past the view budget each one's pass is kept
    with the run (its thumbnails, `views.all_heads`, keep it), for the other heads the page asks for
    once it draws one."""
    values = []
    for beside in asked:
        if abs(beside - layer) != 1 or not 0 <= beside < run.config.n_layers:
            continue
        value = layer_view_value(run, beside, head, style, every_head=True)
        budget -= payload.value_bytes(value)
        if budget < 0:
            break
        values.append(value)
    return values


def pipeline_names(run, layer: int) -> Callable[[int], str]:
    """Each head's pipeline downloads' name: the model's, the layer's and the head's."""
    model = run.explorer.name
    return lambda head: payload.file_name(model, f"layer{layer}", f"head{head}", "pipeline")


def rope_plots(run, layer: int, head: int, query: int, key: int) -> list[PlotData]:
    """The head's RoPE rotation and score split as plot data, downloads named by model, layer and head."""
    figures = [
        views.rope_rotation(run, layer, head, query, key),
        views.rope_score_split(run, layer, head, query, key),
    ]
    return [
        plot(fig, payload.file_name(run.explorer.name, f"layer{layer}", f"head{head}", name))
        for fig, name in zip(figures, HEAD_FIGURES[1:], strict=True)
    ]


def index(value, name: str) -> int:
    """A layer, head or position as the handlers take it: a whole number, or a clear ValueError (an API
    call may send None, text or 2.5 where the page sends 2)."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if not number or not math.isfinite(value) or value != int(value):
        raise ValueError(f"{name} must be a whole number, got {str(value)[:40]!r}")
    return int(value)


def picked_head(run, layer, head) -> tuple[int, int]:
    """A layer and head the page (or an API call) asked for, checked against the run's model."""
    return head_of(run.config.n_layers, run.config.n_heads, layer, head)


def head_of(n_layers: int, n_heads: int, layer, head) -> tuple[int, int]:
    """A layer and head asked for, checked against a model of `n_layers` layers of `n_heads` heads: an
    API call may send anything, refused quoting it briefly."""
    layer, head = index(layer, "layer"), index(head, "head")
    if not (0 <= layer < n_layers and 0 <= head < n_heads):
        raise ValueError(
            f"There is no layer {layer:,}, head {head:,} in this model "
            f"({n_layers} layers of {n_heads} heads)."
        )
    return layer, head


def top(count: int) -> int:
    """A slider's maximum over `count` items (Gradio needs maximum > minimum, even for one item)."""
    return max(count - 1, 1)


def warn(error: Exception, where: str, toast: bool = True) -> str:
    """What a person is told of an error (a toast unless `toast` is false, and the words for the status
    line): its message when it is theirs to fix, else that something went wrong, its trace kept in the
    log. Work they stopped (the page's Stop) is said on the status line alone."""
    if isinstance(error, StoppedError):
        return str(error)
    if isinstance(error, (PromptError, CheckpointError, LimitError, ValueError)):
        message = str(error)
    else:
        log.exception("handler %s failed", where)
        message = f"Something went wrong ({type(error).__name__}); the views on screen are unchanged."
    if toast:
        toasts.warning(message)
    return message


def guarded(status):
    """Turn an error into a warning and a status message, leaving every other output as it is; a
    person never sees a stack trace and the app stays up. A handler returns its updates as a dict
    keyed by output (Gradio leaves those it does not name as they are; `{}`: nothing changes), and an
    error `{status: message}`. A generator handler (one that streams) yields the warning as its last
    update, after the ones it yielded before the error."""

    def decorate(handler):
        def warning(error: Exception):
            return {status: markup.status(warn(error, handler.__name__), "warning")}

        if inspect.isgeneratorfunction(handler):

            @functools.wraps(handler)
            def stream(*args, **kwargs):
                try:
                    for update in handler(*args, **kwargs):
                        yield sent(update)
                except Exception as error:
                    yield warning(error)

            return stream

        @functools.wraps(handler)
        def wrapper(*args, **kwargs):
            try:
                return sent(handler(*args, **kwargs))
            except Exception as error:
                return warning(error)

        return wrapper

    return decorate


def show_progress(fraction: float, text: str) -> None:
    """A job's progress (`app.jobs`) as the progress of the event computing it: on the status line, its
    bar and `text` (`layout.progress_on_status`). Outside an event, nothing."""
    gr.Progress()(fraction, desc=text)


def sent(updates):
    """A handler's updates as Gradio takes them: `{}` (nothing changes; Gradio takes a dict of
    updates, but not an empty one) as the one update that leaves every output as it is."""
    return gr.skip() if isinstance(updates, dict) and not updates else updates


@dataclass(frozen=True, kw_only=True)
class Controls:
    """The page's controls above the tabs (besides those every tab shares: `Shared`)."""

    prompt: gr.Textbox
    run_button: gr.Button
    examples: gr.Examples
    picker: gr.Dropdown
    load_button: gr.Button
    model_card: gr.HTML
    token_strip: gr.HTML
    model: gr.State  # the source of the loaded model ('' is the bundled one)
    current_tab: gr.State  # the name of the tab on screen, for links (set as a tab opens)


@dataclass(frozen=True, kw_only=True)
class Shared:
    """The page's controls every tab may read or write."""

    workspace: Workspace
    readings: Readings  # expensive readings: one per visitor at a time, their memory in the budget
    jobs: Jobs  # long jobs under way, by page session: their progress shown, ended by `stop`
    stop: gr.Button  # beside the status line, shown while a job's progress is: stops the page's jobs
    downloads: Downloads  # files written for visitors: one each, whichever tab wrote it
    status: gr.HTML
    shown: gr.State  # (model source, prompt) of the views on screen, or None; (…, ablation) when the
    # Intervene tab shows an ablated run in them: `workspace.run(*shown)` takes either
    layer: gr.Slider
    head: gr.Dropdown
    map_style: gr.State  # views.MapStyle: how softmax maps are drawn (log colours, weighted by ‖v·W_O‖)


@dataclass(frozen=True)
class Handler:
    """A handler of the layout's (running the prompt, redrawing the views) that a tab's own events
    chain after theirs: the function, which takes its inputs' values by their keys, with its inputs
    and outputs."""

    fn: Callable
    inputs: Inputs
    outputs: list

    def after(self, event):
        """Chained after `event`, its progress shown on the status line (every handler's first output)
        alone, not as a timer on each of its plots."""
        return event.then(
            *named(self.fn, self.inputs), self.outputs, api_name=False, show_progress_on=self.outputs[0]
        )


@dataclass(frozen=True)
class Follower:
    """A view of another tab's that follows the layer and head (the zoom, the generation's rows). The
    layout's switch handlers redraw it in the same event as the head's and layer's figures: one round
    trip per switch, where a listener of its own would add another (in Gradio's page each event costs
    its request and every component's loading status, about 0.1-0.2 s at 256 tokens)."""

    inputs: Inputs
    outputs: list
    update: Callable  # (layer, head, **values of `inputs` by key) -> {output: update}, those that change


@dataclass(frozen=True)
class Followers:
    """Several followers as one, by name: their inputs (each follower's under its name) and outputs,
    and their updates."""

    each: dict[str, Follower]

    @property
    def inputs(self) -> dict:
        return {name: follower.inputs for name, follower in self.each.items()}

    @property
    def outputs(self) -> list:
        return [component for follower in self.each.values() for component in follower.outputs]

    def update(self, layer: int, head: int, values: dict) -> dict:
        """Each follower's updates, from its inputs' values (`values`, as `inputs` keys them)."""
        updates = {}
        for name, follower in self.each.items():
            updates |= follower.update(layer, head, **values[name])
        return updates


# The events of expensive readings take turns in one queue of their own, as many at once as the policy's
# concurrency (explorer.app.limits).
COSTLY = dict(concurrency_id="costly")

# The events whose handlers read what the event carries (a cell, a head, a layer's ask) run once per
# trigger. Gradio's "always_last" runs a trigger that came while the event ran with the data of the one
# it came behind, so the later click (or the layer now on screen's ask) would be lost.
EACH_TRIGGER = dict(trigger_mode="multiple")


class AfterRuns:
    """What the tabs drawn by expensive readings do after a run (the open one redrawn, a typed target
    forgotten), chained as one event per run in the readings' turn: a visitor's run takes one turn of
    the expensive readings, whichever tabs there are, and at most one tab is open to draw. Each handler
    takes the request and its inputs' values by their keys, and returns its updates."""

    def __init__(self):
        self.handlers: list[Handler] = []

    @classmethod
    def wired(cls, shared: Shared, tabs: list) -> AfterRuns:
        """The handlers of `tabs`, each wiring its events (its `wire(shared, after_runs)`)."""
        after_runs = cls()
        for tab in tabs:
            tab.wire(shared, after_runs)
        return after_runs

    def add(self, fn: Callable, inputs: Inputs, outputs: list) -> None:
        self.handlers.append(Handler(fn, inputs, outputs))

    def chain(self, runs: list) -> None:
        inputs = {f"handler_{n}": handler.inputs for n, handler in enumerate(self.handlers)}
        outputs = list(dict.fromkeys(block for handler in self.handlers for block in handler.outputs))

        def after_run(request: gr.Request, **values):
            updates = {}
            for n, handler in enumerate(self.handlers):
                done = handler.fn(request=request, **values[f"handler_{n}"])
                updates |= done if isinstance(done, dict) else {}
            return sent(updates)

        for event in runs:
            event.then(*named(after_run, inputs), outputs, api_name=False, **COSTLY)


def draw_while_open(
    tab: gr.Tab,
    is_open: gr.State,
    draw: Callable,
    reads: dict,
    outputs: list,
    after_runs: AfterRuns,
    api_name,
):
    """`draw(request, **reads)` when `tab` opens, and after each run while it is open (a tab drawn only
    when on screen, by an expensive reading; `outputs` start with the status line and `is_open`, which
    `draw` sets)."""

    def after_run(request: gr.Request, opened, **values):
        return draw(request=request, **values) if opened else {}

    tab.select(*named(draw, reads), outputs, api_name=api_name, **COSTLY)
    after_runs.add(after_run, {"opened": is_open, **reads}, outputs)


def close_when(is_open: gr.State, tabs: list[gr.Tab]) -> None:
    """Selecting any of `tabs` takes the tab whose `is_open` this is off screen."""
    gr.on([t.select for t in tabs], lambda: False, None, is_open, api_name=False, queue=False)

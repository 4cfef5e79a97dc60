"""Links that restore a view: `?prompt=…&layer=…&head=…&model=…&tab=…` opens exactly that (and, when
set, how softmax maps are drawn: `log` and `weighted`, the RoPE positions `q` and `k`, the heads to
`ablate` with their `mode` and `views`, the patching prompts `clean`, `corrupted`, `answer`,
`distractor`, the lens' `target` and `against`, the `cell` whose score is split: "query,key", the
attention cells knocked out: `knockout=layer.head:query-key,…`, and the
Circuit tab's dataset and settings: `circuit`, `pairs_n`, `seed` or the typed `pairs`, `metric`,
`methods`, `positions`), and the Generate tab's steering (`towards`, `away`, `steer_layer`, `strength`,
`words`, `instruction`, `held_out`), and
"Copy link" gives the link of what is on screen. A link names a picker model by its label, so it works on
any machine that has that model; any other model by its source as typed."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from urllib.parse import parse_qsl, urlencode

import gradio as gr

from explorer.app.ui.steer import LINK_KEYS as STEER_KEYS
from explorer.app.ui.steer import SteerPanel
from explorer.app.ui.wiring import named
from explorer.engine.edits import Knockout
from explorer.engine.interventions import ABLATE_MODES
from explorer.engine.values import brief
from explorer.errors import CheckpointError
from explorer.loading import catalog
from explorer.views import MapStyle

TABS = ("attention", "rope", "gqa", "faithfulness", "overview", "intervene", "generate", "lens", "flow")
TABS += ("circuit",)
COPY_JS = """(query) => {
  const link = window.location.origin + window.location.pathname + query;
  if (navigator.clipboard) navigator.clipboard.writeText(link).catch(() => {});
  return link;
}"""

# A link's tab, opened in the page as a click would open it: tab "rope" is the button #tab-rope-button
# (each tab's elem_id is "tab-" and its name in TABS, explorer/ui/*.py).
OPEN_TAB_JS = """() => {
  const tab = (new URLSearchParams(window.location.search).get("tab") || "").trim().toLowerCase();
  const button = /^[a-z]+$/.test(tab) && document.querySelector(`#views #tab-${tab}-button`);
  if (button && button.getAttribute("aria-selected") !== "true") button.click();
}"""


CIRCUIT_KEYS = ("circuit", "pairs_n", "seed", "pairs", "metric", "methods", "positions")  # settings' order


@dataclass(frozen=True, kw_only=True)
class ViewState:
    """What a link carries: the view on screen and everything a person set for it. A setting at its
    default (the page's own before anyone touches it) is left out of the link, and read back as it."""

    prompt: str = ""
    model: str = ""  # the picker's label of the model ('': the bundled one), or its source as typed
    tab: str = "attention"  # one of TABS
    layer: int = 0
    head: int = 0
    style: MapStyle = field(default_factory=MapStyle)  # how softmax maps are drawn
    query: int | None = None  # the RoPE positions m and n, both or neither
    key: int | None = None
    ablate: tuple[str, ...] = ()  # heads to ablate, "layer.head"
    mode: str = "zero"  # how they are ablated (ABLATE_MODES)
    in_views: bool = False  # the other views show the ablated run
    clean: str = ""  # the patching prompts
    corrupted: str = ""
    answer: str = ""
    distractor: str = ""
    target: str = ""  # the lens' target token, and what it is read against
    against: str = ""
    cell: tuple[int, int] | None = None  # (query, key) of the head's score split ("why this score")
    knockout: str = ""  # the attention cells knocked out, as `Knockout.spelled` writes them
    circuit: str = ""  # the Circuit tab's dataset and settings, as a query (`circuit.settings`)
    steer: str = ""  # the Generate tab's steering settings, as a query (`steer.settings`)

    @classmethod
    def on_page(
        cls, *, layer, head, model="", query=None, key=None, ablate=(), cell=None, knockout=None, **values
    ) -> ViewState:
        """The view state of the page's controls: the model by its source, the heads to ablate as the
        picker lists them ("3.1 · kv 0"), and the cell whose score is split, (layer, head, query, key)
        (kept only when it is on this head)."""
        layer, head = int(layer), int(head)
        on_head = cell is not None and tuple(cell[:2]) == (layer, head)
        label = catalog.label_of(model)
        return cls(
            model="" if label == catalog.BUNDLED_LABEL else label,
            layer=layer,
            head=head,
            query=None if query is None or key is None else int(query),
            key=None if query is None or key is None else int(key),
            ablate=tuple(str(value).split(" ")[0] for value in ablate or ()),  # "3.1 · kv 0" -> "3.1"
            cell=(int(cell[2]), int(cell[3])) if on_head else None,
            knockout=knockout[1] if knockout and knockout[0] == values.get("prompt") else "",
            **values,
        )

    @classmethod
    def of_params(cls, params: dict[str, str]) -> ViewState:
        """The view state a link's query parameters name, a setting it leaves out (or names wrongly)
        at its default; the layer and head as written (`index_within` fits them to a model)."""
        query, key = integer(params, "q"), integer(params, "k")
        cell = [part.strip() for part in params.get("cell", "").split(",")]
        tab = tab_of(params) or cls.tab
        texts = ("prompt", "model", "clean", "corrupted", "answer", "distractor", "target", "against")
        return cls(
            **{name: params.get(name, "") for name in texts},
            tab=tab,
            layer=integer(params, "layer") or 0,
            head=integer(params, "head") or 0,
            style=map_style(params) or MapStyle(),
            query=None if key is None else query,
            key=None if query is None else key,
            ablate=tuple(value for value in params.get("ablate", "").split(",") if value.strip()),
            mode=params["mode"] if params.get("mode") in ABLATE_MODES else "zero",
            in_views=flag(params, "views"),
            cell=(int(cell[0]), int(cell[1])) if len(cell) == 2 and whole(cell) else None,
            knockout=spelled_knockout(params.get("knockout", "")),
            circuit=urlencode({k: params[k] for k in CIRCUIT_KEYS if k in params})
            if tab == "circuit"
            else "",
            steer=urlencode({k: params[k] for k in STEER_KEYS.values() if k in params})
            if tab == "generate"
            else "",
        )


def spelled_knockout(text: str) -> str:
    """A link's knocked-out cells as `Knockout.spelled` writes them, or '' where it names none."""
    try:
        return Knockout.read(text).spelled() if text.strip() else ""
    except ValueError:
        return ""


def whole(parts: list[str]) -> bool:
    """Whether each part is a whole number of at most 9 digits."""
    return all(part.isdecimal() and len(part) <= 9 for part in parts)


def query_string(state: ViewState) -> str:
    """The query part of a link to this view: the prompt, layer, head and tab, and everything else a
    person set (how maps are drawn, RoPE positions, the heads to ablate and how, the patching
    prompts, the lens' target and what it is read against, the cell whose score is split, the
    circuit), each only when it is not the default."""
    params = {"prompt": state.prompt, "layer": state.layer, "head": state.head, "tab": state.tab}
    if state.model and state.model != catalog.BUNDLED_LABEL:
        params["model"] = state.model
    if state.style.log:
        params["log"] = 1
    if state.style.weighted:
        params["weighted"] = 1
    if state.query is not None and state.key is not None:
        params["q"], params["k"] = state.query, state.key
    if state.ablate:
        params["ablate"] = ",".join(state.ablate)
        if state.mode != "zero":
            params["mode"] = state.mode
        if state.in_views:
            params["views"] = 1
    texts = ("clean", "corrupted", "answer", "distractor", "target", "against")
    params.update({name: getattr(state, name) for name in texts if getattr(state, name)})
    if state.cell is not None:
        params["cell"] = f"{state.cell[0]},{state.cell[1]}"
    if state.knockout:
        params["knockout"] = state.knockout
    query = urlencode(params)
    if state.circuit and state.tab == "circuit":
        query += "&" + state.circuit
    if state.steer and state.tab == "generate":
        query += "&" + state.steer
    return "?" + query


def read(link: str) -> ViewState:
    """The view state of a link (its query part, "?prompt=…"): `query_string`'s inverse."""
    return ViewState.of_params(dict(parse_qsl(link.partition("?")[2])))


def flag(params: dict[str, str], key: str) -> bool:
    return params.get(key, "").strip().lower() in ("1", "true", "yes")


def map_style(params: dict[str, str]) -> MapStyle | None:
    """How a link asks for softmax maps to be drawn (`log`, `weighted`), or None when it does not say."""
    if "log" not in params and "weighted" not in params:
        return None
    return MapStyle(log=flag(params, "log"), weighted=flag(params, "weighted"))


def requested(request: gr.Request | None) -> dict[str, str]:
    """The view a link asks for: its query parameters, or nothing."""
    if request is None:
        return {}
    return {key: value for key, value in request.query_params.items() if value.strip()}


def integer(params: dict[str, str], key: str) -> int | None:
    """A whole number from the link, or None when it is missing or not one."""
    try:
        return max(int(params[key]), 0)
    except (KeyError, ValueError):
        return None


def index_within(params: dict[str, str], key: str, count: int) -> tuple[int | None, str]:
    """The link's layer or head (`key`) as one of the model's `count`, and what the page says of a value
    it could not take ('' when it took it as it is): a number past the model is its last, one below 0
    its first; text that is no whole number is dropped (None: the control keeps its value)."""
    text = params.get(key)
    if text is None or count < 1:  # not asked for, or no model to hold it against
        return None, ""
    try:
        value = int(text)
    except ValueError:  # not a number, or one of more than 4,300 digits
        value = None
    if value is not None and 0 <= value < count:
        return value, ""
    kept = None if value is None else min(max(value, 0), count - 1)
    shown = f"{key} {kept} is shown" if kept is not None else f"the {key} on screen stays"
    quoted = brief(text) if value is None else brief(value)
    return kept, f"The link's {key} {quoted} is not one of this model's {count:,} {key}s: {shown}."


def tab_of(params: dict[str, str]) -> str | None:
    tab = params.get("tab", "").lower()
    return tab if tab in TABS else None


def restore_view(workspace, model: str, request: gr.Request) -> tuple[ViewState, frozenset[str], str]:
    """The view a link asks for before its run: its state, with the layer and head fitted to the loaded
    model; the fields the link names (the page changes those alone); and what the page says of a
    layer or head the model lacks (taken to its nearest, or dropped: left unnamed)."""
    params = requested(request)
    try:
        config = workspace.explorer(model, load=False).config
        counts = {"layer": config.n_layers, "head": config.n_heads}
    except CheckpointError:  # no model to hold them against: the controls keep theirs
        counts = {"layer": 0, "head": 0}
    layer, layer_note = index_within(params, "layer", counts["layer"])
    head, head_note = index_within(params, "head", counts["head"])
    state = ViewState.of_params(params)
    state = replace(state, layer=state.layer if layer is None else layer)
    state = replace(state, head=state.head if head is None else head)
    named = {name for name in TEXTS if name in params}
    named |= {name for name, value in (("layer", layer), ("head", head)) if value is not None}
    named |= {"tab"} if tab_of(params) else set()
    named |= {"style"} if map_style(params) else set()
    named |= {"ablate"} if state.ablate else set()
    named |= {"mode"} if params.get("mode") in ABLATE_MODES else set()
    named |= {"in_views"} if "views" in params else set()
    named |= {"knockout"} if state.knockout else set()
    named |= {"steer"} if state.steer else set()
    return state, frozenset(named), " ".join(filter(None, (layer_note, head_note)))


TEXTS = ("prompt", "clean", "corrupted", "answer", "distractor", "target", "against")


@dataclass(frozen=True, kw_only=True)
class LinkedControls:
    """The page's controls a link is made of, by the field of `ViewState` each holds (`cell`: the split
    on screen, (layer, head, query, key); `circuit`: the Circuit tab's part of a link)."""

    prompt: gr.Textbox
    model: gr.State  # the loaded model's source
    tab: gr.State  # the tab on screen
    layer: gr.Slider
    head: gr.Dropdown
    style: gr.State
    query: gr.Slider
    key: gr.Slider
    ablate: gr.Dropdown
    mode: gr.Radio
    in_views: gr.Checkbox
    clean: gr.Textbox
    corrupted: gr.Textbox
    answer: gr.Textbox
    distractor: gr.Textbox
    target: gr.Textbox
    against: gr.Textbox
    cell: gr.State
    knockout: gr.State  # (prompt, cells knocked out in its run on screen), or None
    circuit: gr.Textbox
    steer: gr.State

    @classmethod
    def of_page(cls, shared, controls, tabs) -> LinkedControls:
        """The controls of the page (`common.Shared`, `common.Controls`, `layout.Tabs`) a link is made of."""
        s, c, t = shared, controls, tabs
        patching = dict(zip(("clean", "corrupted", "answer", "distractor"), t.intervene.prompts, strict=True))
        return cls(
            prompt=c.prompt,
            model=c.model,
            tab=c.current_tab,
            layer=s.layer,
            head=s.head,
            style=s.map_style,
            query=t.rope.query,
            key=t.rope.key,
            ablate=t.intervene.heads,
            mode=t.intervene.mode,
            in_views=t.intervene.in_views,
            **patching,
            target=t.lens.target,
            against=t.lens.distractor,
            **t.attention.why.linked,
            circuit=t.circuit.linked,
            steer=t.generate.steer.linked,
        )

    def wire_copy(self, button: gr.Button, link: gr.Textbox) -> None:
        """ "Copy link": the view state read from the controls, by their fields' names, its link shown
        and copied."""

        def copy(**values) -> str:
            return query_string(ViewState.on_page(**values))

        controls = {name.name: getattr(self, name.name) for name in fields(self)}
        button.click(*named(copy, controls), link, api_name=False).then(None, link, link, js=COPY_JS)


@dataclass(frozen=True, kw_only=True)
class RestoredControls:
    """What a link writes before its run (`restore_view`): what the page says of it, and the controls
    of the fields it names (among `linked`, and the map style's boxes), with whether the Overview is
    open. The model is the loader's, the RoPE positions follow the run, the cell is the page's (once
    its pipeline is drawn) and the circuit the Circuit tab's; the steering panel's settings (`steer`)."""

    linked: LinkedControls
    steer: SteerPanel
    notes: gr.State
    overview_open: gr.State  # the Overview fills at once when the link opens it
    log_box: gr.Checkbox
    weighted_box: gr.Checkbox

    RESTORED = (*TEXTS, "layer", "head", "tab", "style", "ablate", "mode", "in_views", "knockout")

    @property
    def outputs(self) -> list:
        linked = [getattr(self.linked, name) for name in self.RESTORED]
        steering = [self.steer.accordion, *self.steer.settings_inputs]
        return [self.notes, self.overview_open, self.log_box, self.weighted_box, *linked, *steering]

    def updates(self, state: ViewState, named: frozenset[str], notes: str) -> dict:
        """The controls' updates for a link's state, those of fields it does not name left out."""
        updates = {
            getattr(self.linked, name): getattr(state, name) for name in self.RESTORED if name in named
        }
        if "style" in named:
            updates |= {self.log_box: state.style.log, self.weighted_box: state.style.weighted}
        if "ablate" in named:
            updates[self.linked.ablate] = list(state.ablate)
        if "knockout" in named:  # knocked out in the prompt's run, once it has run (`WhyPanel`)
            updates[self.linked.knockout] = (state.prompt, state.knockout)
        if "steer" in named:
            updates |= self.steer.restored(state.steer)
        return updates | {self.notes: notes, self.overview_open: state.tab == "overview"}

    def wire(self, event, workspace, model: gr.State):
        """The link's view restored after `event` (the page's load); the event that does it."""

        def restore(model, request: gr.Request) -> dict:
            return self.updates(*restore_view(workspace, model, request))

        return event.then(restore, model, self.outputs, api_name=False)

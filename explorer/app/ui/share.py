"""Links that restore a view: `?prompt=…&layer=…&head=…&model=…&tab=…` opens exactly that (and, when
set, how softmax maps are drawn: `log` and `weighted`, the RoPE positions `q` and `k`, the heads to
`ablate` with their `mode` and `views`, the patching prompts `clean`, `corrupted`, `answer`,
`distractor`, the lens' `target` and `against`, the `cell` whose score is split: "query,key", and the
Circuit tab's dataset and settings: `circuit`, `pairs_n`, `seed` or the typed `pairs`, `metric`,
`methods`), and
"Copy link" gives the link of what is on screen. A link names a picker model by its label, so it works on
any machine that has that model; any other model by its source as typed."""

from __future__ import annotations

from urllib.parse import urlencode

import gradio as gr

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


def query_string(
    prompt: str,
    layer,
    head,
    model: str,
    tab: str,
    style: MapStyle = MapStyle(),
    query=None,
    key=None,
    ablate=(),
    mode: str = "zero",
    in_views: bool = False,
    clean: str = "",
    corrupted: str = "",
    answer: str = "",
    distractor: str = "",
    target: str = "",
    against: str = "",
    cell: str = "",
    circuit: str = "",
) -> str:
    """The query part of a link to this view: everything a person set (how maps are drawn, RoPE positions,
    the heads to ablate and how, the patching prompts, the lens' target and what it is read against),
    each only when it is not the default."""
    label = catalog.label_of(model)
    params = {"prompt": prompt, "layer": int(layer), "head": int(head), "tab": tab}
    if label and label != catalog.BUNDLED_LABEL:
        params["model"] = label
    if style.log:
        params["log"] = 1
    if style.weighted:
        params["weighted"] = 1
    if query is not None and key is not None:
        params["q"], params["k"] = int(query), int(key)
    if ablate:
        params["ablate"] = ",".join(str(value).split(" ")[0] for value in ablate)  # "3.1 · kv 0" -> "3.1"
        if mode != "zero":
            params["mode"] = mode
        if in_views:
            params["views"] = 1
    patching = {"clean": clean, "corrupted": corrupted, "answer": answer, "distractor": distractor}
    params.update({name: text for name, text in patching.items() if text})
    params.update({name: text for name, text in (("target", target), ("against", against)) if text})
    shown = str(cell or "").split(",")  # the clicked cell, "layer,head,query,key,nonce": on this head
    if (
        len(shown) >= 4
        and all(part.isdecimal() for part in shown[:4])
        and shown[:2] == [str(params["layer"]), str(params["head"])]
    ):
        params["cell"] = f"{int(shown[2])},{int(shown[3])}"
    query = urlencode(params)
    if circuit and tab == "circuit":  # the circuit on screen's dataset and settings (ui.circuit.settings)
        query += "&" + circuit
    return "?" + query


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


def restore_view(workspace, model: str, request: gr.Request) -> tuple:
    """What a link asks for before its run (each left as it is when the link does not say): the
    prompt, layer, head and tab (the page itself opens the tab: OPEN_TAB_JS), how maps are
    drawn, the heads to ablate (ablated after the run, as after any run), the patching prompts and
    the lens' target and what it is read against. First, what the page says of a layer or head the
    loaded model lacks (taken to its nearest, or dropped)."""
    params = requested(request)
    try:
        config = workspace.explorer(model, load=False).config
        counts = {"layer": config.n_layers, "head": config.n_heads}
    except CheckpointError:  # no model to hold them against: the controls keep theirs
        counts = {"layer": 0, "head": 0}
    layer, layer_note = index_within(params, "layer", counts["layer"])
    head, head_note = index_within(params, "head", counts["head"])
    tab = tab_of(params)

    def given(key: str):
        return params.get(key, gr.skip())

    style = map_style(params)
    ablate = [value for value in params.get("ablate", "").split(",") if value.strip()]
    return (
        " ".join(filter(None, (layer_note, head_note))),
        given("prompt"),
        gr.skip() if layer is None else layer,
        gr.skip() if head is None else head,
        gr.skip() if tab is None else tab,
        tab == "overview",
        *((style.log, style.weighted, style) if style else (gr.skip(),) * 3),
        ablate or gr.skip(),
        given("mode") if params.get("mode") in ABLATE_MODES else gr.skip(),
        flag(params, "views") if "views" in params else gr.skip(),
        *(given(name) for name in ("clean", "corrupted", "answer", "distractor", "target", "against")),
    )

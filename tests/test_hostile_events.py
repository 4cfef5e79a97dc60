"""What an outside probe sent the served app past its controls (issue 52), each held: a handler outside
the queue answers a pasted 100 KB prompt at once, the layer view's events are read as strictly as any
input: each field of their data refused by name when it is not what the page sends, the session's
stream left whole, and a value no choice or number control could hold is refused by the control's
name, its markup shown as the toast's text."""

from __future__ import annotations

import json
import time

import gradio as gr
import httpx
import pytest

from explorer.app.policy import Policy
from explorer.app.ui import build_demo
from explorer.app.ui import inputs as checked
from explorer.app.workspace import Workspace
from explorer.tools.stress_client import App, status_of
from tests.conftest import free_port

IOI = "When Mary and John went to the store, John gave a drink to"
CLEAN = "To be, or not to be, that is the question: whether the"
PASTED = ("Then Ann met Bob. " * 6_000)[:100_000]  # 100 KB, a capitalised word in every four


class Served:
    """The app served, its events reached as the page reaches them: by the index of the function an
    event of a component runs, with the event's data (`/queue/join`, or `/run/predict` outside the
    queue)."""

    def __init__(self, demo):
        self.demo, self.url = demo, demo.local_url.rstrip("/")
        self.api = App(self.url, timeout=60)
        self.http = httpx.Client(timeout=60)

    def component(self, elem_id: str):
        return next(b for b in self.demo.blocks.values() if getattr(b, "elem_id", None) == elem_id)

    def function(self, component, event: str, handler: str) -> int:
        """The index of the function `handler` that `event` of `component` runs."""
        (index,) = (
            index
            for index, fn in self.demo.fns.items()
            if (component._id, event) in [tuple(target) for target in fn.targets] and fn.name == handler
        )
        return index

    def starting(self, index: int, labelled: dict | None = None) -> list:
        """The inputs of function `index` as the page starts with them (a state's is the session's),
        those whose label `labelled` names given its value instead."""
        labelled = labelled or {}
        return [
            None if block.stateful else labelled.get(getattr(block, "label", None), block.value)
            for block in self.demo.fns[index].inputs
        ]

    def call(self, at: str, name: str, data, session: str) -> tuple[int, dict | str]:
        """(HTTP status, answer) of server function `name` of the component `at`, as the page calls it."""
        body = {
            "session_hash": session,
            "component_id": self.component(at)._id,
            "fn_name": name,
            "data": data,
        }
        answer = self.http.post(f"{self.url}/gradio_api/component_server", json=body)
        return answer.status_code, answer.json()

    def send(self, at: str, event: str, handler: str, data: list | None, event_data=None, session="probe"):
        """(ok, the outputs or the error's message) of `event` of the component `at` (its elem_id) run
        by `handler`, as the page sends it: `data` the inputs' values (None: as the page starts)."""
        component = self.component(at)
        index = self.function(component, event, handler)
        if data is None:
            data = self.starting(index)
        body = {"data": data, "event_data": event_data, "fn_index": index, "session_hash": session}
        body["trigger_id"] = component._id
        if not self.demo.fns[index].queue:
            answer = self.http.post(f"{self.url}/gradio_api/run/predict", json=body)
            sent = answer.json()
            return answer.status_code == 200, sent["data"] if answer.status_code == 200 else sent["error"]
        event_id = self.http.post(f"{self.url}/gradio_api/queue/join", json=body).json()["event_id"]
        with self.http.stream("GET", f"{self.url}/gradio_api/queue/data?session_hash={session}") as stream:
            for line in stream.iter_lines():
                message = json.loads(line[5:]) if line.startswith("data:") else {}
                if message.get("event_id") == event_id and message.get("msg") == "process_completed":
                    output = message.get("output") or {}
                    return bool(message.get("success")), output.get("data") or str(output.get("error"))
        return False, "the session's stream ended without an answer"


@pytest.fixture(scope="module")
def served(gqa_checkpoint):
    policy = Policy(loads_per_minute=10_000, server_loads_per_minute=10_000)
    demo = build_demo(Workspace(gqa_checkpoint, device="cpu", policy=policy))
    demo.launch(server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True)
    try:
        yield Served(demo)
    finally:
        demo.close()


# --- handlers outside the queue: linear in what they read, and bounded first -------------------------


def test_the_patching_prefill_answers_a_100_kb_prompt_at_once_with_its_names_swapped(served):
    """Intervene's prefill runs outside the queue: a 40 KB prompt held a worker thread 9 s, and 45 such
    requests every thread the server has."""
    start = time.perf_counter()
    ok, boxes = served.send("tab-intervene", "select", "prefill", [PASTED, "", "", "", "", None])
    assert ok and time.perf_counter() - start < 10, boxes  # (it took 190 s for 160 KB)
    clean, corrupted = boxes[0], boxes[1]
    assert len(clean) < len(PASTED) and PASTED.startswith(clean)  # cut to what a run reads
    assert corrupted == clean.replace("Ann", "\0").replace("Bob", "Ann").replace("\0", "Bob")


def test_the_patching_prefill_still_swaps_an_ioi_prompts_names(served):
    ok, boxes = served.send("tab-intervene", "select", "prefill", [IOI, "", "", "", "", None])
    assert ok and boxes[:2] == [IOI, "When John and Mary went to the store, Mary gave a drink to"]


def test_swapping_the_names_of_a_100_kb_clean_prompt_answers_at_once(served):
    """ "Swap the two names" read every capitalised word's whole prefix again: 100 KB took 150 s."""
    start = time.perf_counter()
    ok, outputs = served.send("patch-swap", "click", "swap", [PASTED, None])
    assert ok and time.perf_counter() - start < 10, outputs
    assert outputs[1].startswith("Then Bob met Ann. Then Bob met Ann.")


def test_a_clean_prompt_naming_thousands_lists_a_few_of_them(served):
    letters = "abcdefghijklmnopqrstuvwxyz"
    names = [f"Q{a}{b}{c}" for a in letters for b in letters for c in letters][:3_000]
    ok, outputs = served.send("patch-swap", "click", "swap", ["Then " + " and ".join(names), None])
    status = status_of(outputs)
    assert ok and f"names 3,000 people ({', '.join(names[:5])}, …)" in status and len(status) < 300


# --- the layer view's events: their data read as strictly as any input -------------------------------


def ran(served: Served, session: str) -> list:
    """The session's views show a run of CLEAN (the model has 4 layers of 8 heads): the run's outputs."""
    ok, outputs = served.api.call("run", [CLEAN, 0, 0], session)
    assert ok, outputs
    return outputs


LAYER_VIEW = "pipeline-plot"


def view_of(outputs) -> str:
    """The view key of the layer view's value among a run's or a switch's outputs."""
    return next(o["view"] for o in outputs if isinstance(o, dict) and "view" in o)


def pack(served: Served, asked, session: str):
    """The layer view's server function `layer_pack`, called as the page calls it."""
    return served.call(LAYER_VIEW, "layer_pack", asked, session)


def test_a_pack_ask_past_64_bits_is_refused_by_name_and_the_session_goes_on(served):
    """A layer of 10**30 was sent back as the layer the answer is for, which no JSON writer takes: the
    session's stream ended, and every later event of the page with it."""
    view = view_of(ran(served, "huge-layer"))
    asked = {"view": view, "part": "beside", "layer": 10**30, "head": 0, "layers": [0, 2]}
    status, answer = pack(served, asked, "huge-layer")
    assert status == 200 and "The event's layer takes a whole number, got 1,000,000,000" in answer["error"]
    status, answer = pack(served, asked | {"layer": 1}, "huge-layer")
    assert status == 200 and answer["around"] == 1 and len(answer["neighbours"]) == 2


def test_a_pack_ask_of_a_head_or_layer_the_model_lacks_is_refused_naming_it(served):
    """Head 99 of an 8-head model was "Something went wrong (IndexError)"."""
    view = view_of(ran(served, "head-99"))
    asked = {"view": view, "part": "beside", "layer": 1, "head": 99, "layers": [0, 2]}
    _, answer = pack(served, asked, "head-99")
    assert "There is no layer 1, head 99 in this model (4 layers of 8 heads)." in answer["error"]
    _, answer = pack(served, asked | {"head": 0, "layers": [0, 7]}, "head-99")
    assert "There is no layer 7 in this model (4 layers)." in answer["error"]
    _, answer = pack(served, {"view": view, "part": "layer", "layer": 4, "head": 0}, "head-99")
    assert "There is no layer 4, head 0 in this model" in answer["error"]


@pytest.mark.parametrize(
    "asked, message",
    [
        ([1, 0], "An event's data is an object of named fields, got a list."),
        ({"view": None, "part": "layer", "layer": 1, "head": 0}, "view takes the key of a view, got None."),
        ({"part": "all", "layer": 1, "head": 0}, "part takes one of layer, heads, beside, got 'all'"),
        ({"part": "beside", "layer": 1, "head": "0", "layers": []}, "head takes a whole number, got '0'"),
        (
            {"part": "beside", "layer": 1, "head": 0, "layers": [0, 2, 3]},
            "at most two layers, got a list of 3",
        ),
        ({"part": "beside", "layer": 1, "head": 0, "layers": [0.5]}, "layers takes a whole number, got 0.5"),
        ({"part": "beside", "layer": 1, "head": 0, "layers": "0,2"}, "layers takes a list"),
        (
            {"part": "heads", "layer": 1, "head": 0, "others": ["1", "0"]},
            "others takes its mark of the other",
        ),
        ({"part": "heads", "layer": 1, "head": 0, "others": "1,0"}, "asked for as 'layer,head,fingerprint'"),
        ({"part": "layer", "layer": 1e300, "head": 0}, "layer takes a whole number, got 1e+300"),
        ({"part": "layer", "layer": 1, "head": 0, "view": "f" * 24}, "This view is no longer on the server"),
    ],
)
def test_a_pack_ask_the_page_never_sends_is_refused_naming_the_field(served, asked, message):
    view = view_of(ran(served, "pack-fields"))
    asked = ({"view": view} | asked) if isinstance(asked, dict) else asked
    status, answer = pack(served, asked, "pack-fields")
    assert status == 200 and message in answer["error"] and len(answer["error"]) < 300, answer
    assert served.api.call("run", ["To be", 0, 0], "pack-fields")[0]  # the session goes on


def test_a_pack_ask_quoting_markup_is_answered_with_it_as_text(served):
    _, answer = pack(served, {"view": MARKUP, "part": "layer", "layer": 0, "head": 0}, "pack-markup")
    assert "<img" not in answer["error"] and "no longer on the server" in answer["error"]
    _, answer = pack(served, {"view": "v", "part": MARKUP, "layer": 0, "head": 0}, "pack-markup")
    assert "<img" not in answer["error"] and "&lt;img" in answer["error"]


# The layer view's events that carry data, by the handler each runs on the server.
HANDLERS = {
    "select_cell": "from_view",
    "cell_asked": "asked_cell",
    "head_picked": "pick",
    "follow": "follow_head",
}


@pytest.mark.parametrize(
    "event, asked, message",
    [
        ("select_cell", [1, 0], "An event's data is an object of named fields, got a list."),
        ("select_cell", {"query": True, "key": 1}, "query takes a whole number, got True"),
        ("select_cell", {"query": 1}, "key takes a whole number, got None"),
        ("cell_asked", {"layer": 1, "head": 0, "query": 1.5}, "query takes a whole number, got 1.5"),
        ("cell_asked", {"layer": 1, "head": {}, "key": 1}, "head takes a whole number, got an object"),
        ("head_picked", {"layer": "1", "head": 0}, "layer takes a whole number, got '1'"),
        ("head_picked", {"layer": 1}, "head takes a whole number, got None"),
        ("head_picked", {"layer": 1e300, "head": 0}, "layer takes a whole number, got 1e+300"),
        ("follow", {"layer": 1, "head": 0, "drawn": "yes"}, "drawn takes true or false, got 'yes'"),
    ],
)
def test_event_data_the_page_never_sends_is_refused_naming_the_field(served, event, asked, message):
    ran(served, "fields")
    ok, answer = served.send(LAYER_VIEW, event, HANDLERS[event], None, asked, "fields")
    assert not ok and message in answer and len(answer) < 300, answer
    assert served.api.call("run", ["To be", 0, 0], "fields")[0]  # the session goes on


def test_event_data_naming_a_file_is_refused_with_no_markup_of_it(served):
    """Gradio checks that a file object in an event's data was uploaded, and its refusal quoted the
    path: "File <img src=//host/t.png> is not in the cache folder", drawn as HTML."""
    ran(served, "file")
    for asked in [{"layer": {"path": MARKUP}, "head": 0}, {"layer": 1, "head": 0, "x": [{"path": MARKUP}]}]:
        ok, toast = served.send(LAYER_VIEW, "head_picked", "pick", None, asked, "file")
        assert not ok and toast == "An event's data names a file that was never uploaded here.", toast


def test_event_data_of_another_layer_or_head_than_the_models_is_refused_naming_them(served):
    ran(served, "range")
    for event, asked in [
        ("head_picked", {"layer": 4, "head": 0}),
        ("cell_asked", {"layer": 4, "head": 0, "query": None, "key": None}),
        ("follow", {"layer": 4, "head": 0, "drawn": True, "layer_changed": False}),
    ]:
        ok, outputs = served.send(LAYER_VIEW, event, HANDLERS[event], None, asked, "range")
        assert ok and "There is no layer 4, head 0 in this model" in status_of(outputs), (event, outputs)


# --- the controls' own values: refused by the control's name, markup shown as text --------------------

MARKUP = "<img src=//host/t.png>"
QUOTED = "'&lt;img src=//host/t.png&gt;'"  # its repr, as the toast's HTML draws it: as text
POSITIONS = "Node scores: each head's output patched at"


@pytest.mark.parametrize(
    "at, event, handler, labelled, message",
    [
        (
            "circuit-button",
            "click",
            "circuit",
            {"Metric": MARKUP},
            f"Metric: {QUOTED} is not one of its choices.",
        ),
        (
            "circuit-button",
            "click",
            "circuit",
            {"Methods": ["exact", MARKUP]},
            f"Methods: {QUOTED} is not one of its choices.",
        ),
        (
            "circuit-button",
            "click",
            "circuit",
            {"Methods": MARKUP},
            f"Methods takes a list of its choices, got {QUOTED}.",
        ),
        (
            "circuit-button",
            "click",
            "circuit",
            {"Dataset": MARKUP},
            f"Dataset: {QUOTED} is not one of its choices.",
        ),
        (
            "circuit-button",
            "click",
            "circuit",
            {"Built-in": MARKUP},
            f"Built-in: {QUOTED} is not one of its choices.",
        ),
        (
            "circuit-patch-button",
            "click",
            "patch_nodes",
            {POSITIONS: MARKUP},
            f"{POSITIONS}: {QUOTED} is not one of its choices.",
        ),
        ("circuit-button", "click", "circuit", {"Pairs": MARKUP}, f"Pairs takes a number, got {QUOTED}."),
        (
            "patch-metric",
            "input",
            "show_metric",
            {"Recovered fraction of": MARKUP},
            f"Recovered fraction of: {QUOTED} is not one of its choices.",
        ),
    ],
)
def test_a_markup_value_sent_to_a_control_is_refused_by_its_name_as_text(
    served, at, event, handler, labelled, message
):
    """Gradio's own check answered "Value: <img src=//host/t.png> is not in the list of choices", and
    the page drew the toast as HTML: the image fetched."""
    index = served.function(served.component(at), event, handler)
    ok, toast = served.send(at, event, handler, served.starting(index, labelled), session="controls")
    assert not ok and toast == message


def test_every_choice_and_number_control_of_the_page_is_a_checked_one(served):
    controls = (gr.Radio, gr.Dropdown, gr.CheckboxGroup, gr.Number, gr.Slider)
    built = [block for block in served.demo.blocks.values() if isinstance(block, controls)]
    assert len(built) > 20 and [b.label for b in built if type(b).__module__ != checked.__name__] == []

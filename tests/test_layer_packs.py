"""The layer view's one channel (`layer_packs`): what it answers for each part, and the gates every
event passes, held on it too: the fair queue, turns, the deadline, the byte budget."""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest

from explorer import views
from explorer.app import payload
from explorer.app.fair_queue import PER_KIND
from explorer.app.policy import Policy
from explorer.app.queue_middleware import COMPONENT_KIND
from explorer.app.ui import build_demo
from explorer.app.ui.common import layer_view_value
from explorer.app.ui.layer_packs import LayerPacks
from explorer.app.visitors import Visitor
from explorer.app.workspace import Workspace
from tests.conftest import free_port

TEXT = "To be, or not to be, that is the question: whether 'tis nobler"
STYLE = views.MapStyle()


@pytest.fixture
def workspace(gqa_checkpoint):
    return Workspace(gqa_checkpoint, device="cpu", policy=Policy())


def remembered(packs: LayerPacks, workspace: Workspace, layer: int = 1, head: int = 0) -> dict:
    """A layer's value as a run's handler sends it, its view remembered."""
    run = workspace.run(None, TEXT)
    return packs.remember(layer_view_value(run, layer, head, STYLE), (None, TEXT), STYLE)


def test_each_part_answers_what_the_view_lacks_as_a_switch_would_send_it(workspace):
    packs = LayerPacks(workspace)
    shown = remembered(packs, workspace)
    run = workspace.run(None, TEXT)
    layer = packs.answer({"view": shown["view"], "part": "layer", "layer": 2, "head": 3})
    assert layer == layer_view_value(run, 2, 3, STYLE)
    assert layer["view"] == shown["view"] and layer["layer"] == 2 and layer["head"] == 3
    mark = layer_mark(layer)
    heads = packs.answer({"view": shown["view"], "part": "heads", "layer": 2, "head": 3, "others": mark})
    assert heads["answer"]["others"] == mark and len(heads["answer"]["heads"]) == run.config.n_heads
    beside = packs.answer({"view": shown["view"], "part": "beside", "layer": 1, "head": 0, "layers": [0, 2]})
    assert beside["around"] == 1 and [v["layer"] for v in beside["neighbours"]] == [0, 2]


def layer_mark(value: dict) -> str:
    return json.loads(value["plot"])["layout"]["meta"]["others"]


def test_a_view_never_sent_or_forgotten_is_refused(workspace):
    packs = LayerPacks(workspace)
    answer = packs.answer({"view": "0" * 24, "part": "layer", "layer": 0, "head": 0})
    assert "This view is no longer on the server" in answer["error"]


def test_the_layers_beside_cost_no_forward_once_the_workspace_no_longer_holds_the_run(workspace):
    packs = LayerPacks(workspace)
    value = layer_view_value(workspace.run(None, TEXT), 1, 0, STYLE)
    shown = packs.remember(value, (None, "A prompt the workspace holds no run of"), STYLE)
    explorer = workspace.explorer(None)
    forwards = explorer.forward_count
    beside = packs.answer({"view": shown["view"], "part": "beside", "layer": 1, "head": 0, "layers": [0, 2]})
    assert beside == {"around": 1, "neighbours": []} and explorer.forward_count == forwards


def test_the_layers_beside_are_sent_only_while_they_fit_the_byte_budget(workspace, monkeypatch):
    packs = LayerPacks(workspace)
    shown = remembered(packs, workspace)
    one = payload.value_bytes(layer_view_value(workspace.run(None, TEXT), 0, 0, STYLE, every_head=True))
    monkeypatch.setattr(payload, "NEIGHBOUR_BYTES", one)
    beside = packs.answer({"view": shown["view"], "part": "beside", "layer": 1, "head": 0, "layers": [0, 2]})
    assert [v["layer"] for v in beside["neighbours"]] == [0]


def test_a_pack_stops_at_the_deadline_saying_so(gqa_checkpoint):
    workspace = Workspace(gqa_checkpoint, device="cpu", policy=Policy(request_seconds=1e-9))
    packs = LayerPacks(workspace)
    shown = packs.remember(layer_view_value(workspace.run(None, TEXT), 1, 0, STYLE), (None, TEXT), STYLE)
    answer = packs.answer({"view": shown["view"], "part": "layer", "layer": 3, "head": 0})
    assert "this app's limit for one request (EXPLORER_REQUEST_SECONDS)" in answer.get("error", ""), answer


def test_packs_take_turns_as_the_queue_runs_one_functions_events(workspace):
    packs = LayerPacks(workspace)  # the policy's concurrency: 1
    running, most = 0, 0
    lock = threading.Lock()

    def answered(asked):
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.05)
        with lock:
            running -= 1
        return {}

    packs._answer = answered
    asked = {"view": "v", "part": "layer", "layer": 0, "head": 0}
    threads = [threading.Thread(target=packs.answer, args=(asked,)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert most == 1


def test_the_fair_queue_admits_a_pack_call_as_it_admits_a_join(gqa_checkpoint):
    policy = Policy(loads_per_minute=10_000, server_loads_per_minute=10_000)
    demo = build_demo(Workspace(gqa_checkpoint, device="cpu", policy=policy))
    demo.launch(server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True)
    try:
        view = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "pipeline-plot")
        body = {"session_hash": "queued", "component_id": view._id, "fn_name": "layer_pack", "data": {}}
        url = demo.local_url.rstrip("/") + "/gradio_api/component_server"
        visitor = Visitor("127.0.0.1", "queued")
        held = [demo.shares.admit(visitor, COMPONENT_KIND + "layer_pack") for _ in range(PER_KIND)]
        refused = httpx.post(url, json=body, timeout=30)
        assert refused.status_code == 429 and "at most 2 of one kind" in refused.json()["detail"]
        for place in held:
            demo.shares.joined(place, None)
        answered = httpx.post(url, json=body, timeout=30)
        assert answered.status_code == 200 and "error" in answered.json()  # (its data names no view)
        assert demo.shares.held(visitor) == 0  # its place went with its answer
    finally:
        demo.close()

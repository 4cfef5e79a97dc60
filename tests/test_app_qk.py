"""Why this score, over HTTP: `/score_attribution` draws a cell's score split into its sources and its row's
key drivers as the engine computes them, and `/source_effect` tests one source of the split on screen;
`/composition` every pair of heads' composition; bad cells get a clear message; a link carries the cell."""

from __future__ import annotations

import html
import json
import re
from types import SimpleNamespace

import gradio as gr
import numpy as np
import pytest
import torch
from gradio_client import Client

from explorer import views
from explorer.app.ui import share
from explorer.app.ui.layer_view import CellAskedData
from explorer.app.workspace import Workspace
from tests.test_app import LOADS_UNLIMITED, is_plot, serve, status_text

PROMPT = "To be, or not to be, that is the question. To be, or not to be"


@pytest.fixture(scope="module")
def workspace(gqa_checkpoint):
    return Workspace(gqa_checkpoint, device="cpu", policy=LOADS_UNLIMITED)


@pytest.fixture(scope="module")
def client(workspace):
    demo = serve(workspace)
    try:
        client = Client(demo.local_url, verbose=False)
        client.predict(PROMPT, 2, 3, api_name="/run")
        yield client
    finally:
        demo.close()


def traces(value) -> list[dict]:
    return json.loads(value["plot"])["data"]


def title(value) -> str:
    return json.loads(value["plot"])["layout"]["title"]["text"]


def as_array(z) -> np.ndarray:
    """A heatmap's z as the JSON sends it: a typed-array spec (base64 bdata) or nested lists."""
    if isinstance(z, dict):
        import base64

        shape = tuple(int(n) for n in z["shape"].split(","))
        return np.frombuffer(base64.b64decode(z["bdata"]), dtype=np.float32).reshape(shape)
    return np.asarray(z, dtype=float)


def test_a_cells_score_is_split_into_its_sources_as_the_engine_splits_it(client, workspace):
    _, split, row, *numbers, source, tested = client.predict(2, 3, 14, 9, api_name="/score_attribution")
    run = workspace.run("", PROMPT)
    a = run.score_attribution(2, 3, 14, 9)
    assert numbers == [2, 3, 14, 9]
    choices = views.testable_sources(run.score_attribution(2, 3, 14, 9))
    assert source["value"] == choices[0][1] and source["choices"] == [list(c) for c in choices]
    source = source["value"]
    assert tested == ""
    _, tested = client.predict(source, "mean", api_name="/source_effect")  # the cell on screen's
    assert html.escape(views.source_test(run, 2, 3, 14, 9, source, "mean")) in tested
    assert is_plot(split) and is_plot(row)
    table = as_array(traces(split)[0]["z"])
    assert table.sum() == pytest.approx(a.score, abs=1e-4)  # the named sources and "other": every part
    assert f"{a.score:+.4f}" in title(split) and f"{float(a.table.sum()):+.4f}" in title(split)
    d = run.key_drivers(2, 3, 14)
    drivers = as_array(traces(row)[0]["z"])
    np.testing.assert_allclose(drivers.sum(0), d.parts.sum(0).numpy(), atol=1e-4)
    assert "query 14" in title(row)


@pytest.mark.parametrize(
    ("cell", "message"),
    [((9, 0, 1, 1), "no layer 9"), ((0, 8, 1, 1), "no layer 0, head 8")],
)
def test_a_cell_not_in_the_model_is_a_clear_message_and_the_panel_stays(client, cell, message):
    status, split, row, *_ = client.predict(*cell, api_name="/score_attribution")
    assert message in status_text(status)
    assert all(value.get("__type__") == "update" and "value" not in value for value in (split, row))


def test_a_cell_the_page_asks_for_is_read_from_its_event_with_the_last_query_and_top_key_as_none():
    asked = CellAskedData(None, {"layer": 2, "head": 3, "query": 14, "key": 9})
    assert (asked.layer, asked.head, asked.query, asked.key) == (2, 3, 14, 9)
    opened = CellAskedData(None, {"layer": 2, "head": 3, "query": None, "key": None})  # "Open in Attention"
    assert (opened.query, opened.key) == (None, None)


def test_composition_draws_every_pair_of_heads_as_the_engine_scores_it(client, workspace):
    _, figure = client.predict(1, 5, api_name="/composition")
    c = workspace.run("", PROMPT).explorer.composition_scores()
    data = traces(figure)
    assert [t["type"] for t in data] == ["heatmap"] * 3
    n = c.k.shape[0] * c.k.shape[1]
    for trace, expected in zip(data, (c.k, c.q, c.v), strict=True):
        np.testing.assert_allclose(as_array(trace["z"]), expected.reshape(n, n).numpy(), atol=1e-6)
    assert "head 1.5 framed" in re.sub(r"<[^>]+>", " ", title(figure))


def test_a_link_carries_the_cell_of_the_head_it_names():
    def link(head: int, cell: tuple | None) -> str:
        return share.query_string(share.ViewState.on_page(prompt="x", layer=2, head=head, cell=cell))

    assert "cell=14%2C9" in link(3, (2, 3, 14, 9))
    assert "cell" not in link(4, (2, 3, 14, 9))  # another head
    assert "cell" not in link(3, None)


def test_the_readings_behind_the_panel_change_no_view_of_the_run(client, workspace):
    """Splitting a score reads the run; the pipeline drawn after is the one drawn before, value for value."""
    run = workspace.run("", PROMPT)
    before = run.attention(2).probs.clone()
    client.predict(2, 3, 14, 9, api_name="/score_attribution")
    assert torch.equal(run.attention(2).probs, before)


def test_the_panels_figures_are_sent_as_plotly_validates_them(workspace):
    from explorer import views
    from tests.test_figures import assert_valid_as_sent

    run = workspace.run("", PROMPT)
    assert_valid_as_sent(views.why_score(run, 2, 3, 14, 9))
    assert_valid_as_sent(views.what_drives_row(run, 2, 3, 14))
    assert_valid_as_sent(views.composition(run.explorer, (1, 5)))


def test_a_split_and_composition_are_expensive_readings_counted_in_the_budget(client, workspace):
    """Both compute through the readings' limits: their working memory is reserved in the workspace's
    budget (refused with a message when it cannot fit), composition's nothing once kept."""
    from explorer.app import limits

    run = workspace.run("", PROMPT)
    assert limits.why_cost(run).nbytes > limits.TILE_BYTES
    ex = workspace.explorer("")
    fresh = limits.composition_cost(SimpleNamespace(config=ex.config, composition_computed=False)).nbytes
    held, budget = workspace.nbytes(), workspace.max_bytes
    workspace.max_bytes = held + 1000
    try:
        status, split, *_ = client.predict(2, 3, 14, 9, api_name="/score_attribution")
        message = html.unescape(status_text(status))
        assert (
            message.startswith("A score's sources at 29 tokens needs about") and "working memory" in message
        )
        assert split.get("__type__") == "update" and "value" not in split
    finally:
        workspace.max_bytes = budget
    client.predict(1, 5, api_name="/composition")
    assert fresh > 0 and limits.composition_cost(ex).nbytes == 0  # kept: asking again costs nothing


def test_a_split_drawn_while_shown_changes_is_not_hidden_by_the_change(workspace, monkeypatch):
    """The page asks for a link's cell once the run's maps are drawn, while the run's change of `shown`
    is still to hide the panel: the hide step reads whether the split is of `shown` after a split under
    way is drawn, so the split it would have hidden stays."""
    import inspect
    import threading
    import time

    from explorer.app.ui import build_demo
    from explorer.app.ui.why import SplitOf
    from tests.test_limits import request_from

    demo = build_demo(workspace)
    handlers = {event.fn.__name__: event.fn for event in demo.fns.values() if event.fn is not None}

    def call(name: str, **values):
        bound = inspect.signature(handlers[name]).bind(**values)
        return handlers[name](*bound.args, **bound.kwargs)

    workspace.run("", PROMPT)
    shown, split_of = ("", PROMPT), SplitOf()
    begun, slow_split = threading.Event(), views.why_score

    def why_score(*args, **kwargs):
        begun.set()
        time.sleep(0.5)  # the hide step asks while the split is being drawn
        return slow_split(*args, **kwargs)

    monkeypatch.setattr(views, "why_score", why_score)
    drawn = {}
    cell = CellAskedData(None, {"layer": 2, "head": 3, "query": 14, "key": 9})
    asking = threading.Thread(
        target=lambda: drawn.update(
            call("asked_cell", request=request_from("10.0.0.1"), shown=shown, split_of=split_of, cell=cell)
        )
    )
    asking.start()
    assert begun.wait(30)
    hidden = call("hide_unless_read", shown=shown, split_of=split_of)
    asking.join()
    assert sum(getattr(value, "type", None) == "plotly" for value in drawn.values()) == 2  # split, row
    assert split_of.shown == shown and hidden == gr.skip()

"""Steering in the Generate tab, over HTTP: `/steer` reads a direction from the two lists of texts,
continues the prompt plain, steered and behind the instruction, each with the concept's probability and
the held-out perplexity, as the engine computes them; bad settings get a clear message."""

from __future__ import annotations

import html
import re

import pytest
from gradio_client import Client

from explorer.app.ui import share
from explorer.app.ui.steer import settings
from explorer.app.workspace import Workspace
from explorer.engine import steering
from explorer.engine.tokens import printable
from tests.test_app import LOADS_UNLIMITED, serve, status_text

PROMPT = "To be, or not to be"
TOWARD, AWAY = "that is the question\nwhether 'tis nobler", "the slings and arrows\nof outrageous fortune"
WORDS, INSTRUCTION, HELD_OUT = "question, nobler", "Ask a question.", "to take arms against a sea of troubles"


@pytest.fixture(scope="module")
def workspace(gqa_checkpoint):
    return Workspace(gqa_checkpoint, device="cpu", policy=LOADS_UNLIMITED)


@pytest.fixture(scope="module")
def client(workspace):
    demo = serve(workspace)
    try:
        yield Client(demo.local_url, verbose=False)
    finally:
        demo.close()


def steer(client, layer=2, strength=4.0, toward=TOWARD, instruction=INSTRUCTION):
    return client.predict(
        PROMPT, toward, AWAY, layer, strength, WORDS, instruction, HELD_OUT, api_name="/steer"
    )


def test_steering_shows_the_plain_steered_and_prompted_continuations_as_the_engine_reads_them(
    client, workspace
):
    status, table = steer(client)
    assert "Steered at layer 2 with strength 4" in status_text(status)
    ex = workspace.explorer(None)
    vector = ex.steering_vector(TOWARD.splitlines(), AWAY.splitlines(), 2)
    readings = steering.compare(
        ex, PROMPT, ["question", "nobler"], HELD_OUT, vector, 2, (0.0, 4.0), INSTRUCTION, 24
    )
    rows = re.findall(r'<tr class="steer-row">(.*?)</tr>', table)
    assert [re.search(r"<b>(.*?)</b>", row).group(1) for row in rows] == ["plain", "steered ×4", "prompted"]
    for row, reading in zip(rows, readings, strict=True):
        assert html.escape(printable(reading.continuation)) in row
        assert f"{reading.concept_probability:.4f}" in row
        assert f"{reading.held_out_perplexity:,.1f}" in row


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (dict(layer=9), "The layer is one of this model's 0 to 4"),
        (dict(toward="  \n "), "Give the towards texts"),
        (dict(instruction=""), "Give an instruction and a held-out text"),
    ],
)
def test_bad_steering_settings_are_a_clear_message(client, settings, message):
    status, *_ = steer(client, **settings)
    assert message in html.unescape(status_text(status))


def test_a_link_carries_the_steering_on_screen_and_restores_it_into_the_panel_opened():
    from explorer.app.ui.steer import SteerPanel

    class Box:  # a component as the panel's restore names it
        def __init__(self, name):
            self.name = name

    linked = settings(TOWARD, AWAY, 3, -2.5, WORDS, INSTRUCTION, HELD_OUT)
    query = share.query_string(share.ViewState(prompt=PROMPT, tab="generate", steer=linked))
    assert "steer_layer=3" in query and "strength=-2.5" in query
    assert "steer_layer" not in share.query_string(share.ViewState(prompt=PROMPT, tab="lens", steer=linked))
    state = share.read(query)
    assert state.steer == linked
    names = [f.name for f in SteerPanel.__dataclass_fields__.values()]
    panel = SteerPanel(**{name: Box(name) for name in names})
    restored = {box.name: value for box, value in panel.restored(state.steer).items()}
    assert restored.pop("accordion").open is True
    assert restored == dict(
        positive=TOWARD,
        negative=AWAY,
        layer=3,
        strength=-2.5,
        words=WORDS,
        instruction=INSTRUCTION,
        held_out=HELD_OUT,
    )
    # a setting named wrongly is kept as it is on the page; a link naming none changes nothing
    wrong = share.read("?prompt=a&tab=generate&steer_layer=-1&strength=3.3&words=w").steer
    assert {box.name for box in panel.restored(wrong)} == {"words", "accordion"}
    assert panel.restored(share.read("?prompt=a&tab=generate").steer) == {}

"""Attention knockout over HTTP: `/knockout` blocks the Why panel's cell in the run on screen and says
what that did to the next token, as the engine computes it; the views then read the knocked-out run
(the split of a cell included); `/restore` puts the cell back; bad cells get a clear message."""

from __future__ import annotations

import html

import pytest
from gradio_client import Client

from explorer import views
from explorer.app.workspace import Workspace
from explorer.engine.edits import Knockout
from tests.test_app import LOADS_UNLIMITED, is_plot, serve, status_text

PROMPT = "To be, or not to be, that is the question. To be, or not to be"


@pytest.fixture(scope="module")
def workspace(gqa_checkpoint):
    return Workspace(gqa_checkpoint, device="cpu", policy=LOADS_UNLIMITED)


@pytest.fixture
def client(workspace):
    demo = serve(workspace)
    try:
        client = Client(demo.local_url, verbose=False)
        client.predict(PROMPT, 2, 3, api_name="/run")
        yield client
    finally:
        demo.close()


def test_a_knocked_out_cell_says_what_it_did_and_the_views_read_the_knocked_out_run(client, workspace):
    status, line, bars = client.predict(2, 3, 14, 9, api_name="/knockout")
    plain = workspace.run("", PROMPT)
    knockout = Knockout(((2, 3, 14, 9),))
    knocked = workspace.run("", PROMPT, knockout)
    summary = views.knockout_summary(plain, knocked, knockout)
    assert summary.startswith("Knockout of 2.3 at 14 → 9: the next token")
    assert html.escape(summary) in line and html.escape(summary) in status_text(status)
    assert is_plot(bars)
    probs = knocked.attention(2).probs
    assert probs[3, 14, 9] == 0 and float(probs[3, 14].sum()) == pytest.approx(1.0)
    assert plain.attention(2).probs[3, 14, 9] > 0
    # the split of a cell now reads the knocked-out run: a later layer's score, from its knocked stream
    _, split, *_ = client.predict(3, 1, 14, 2, api_name="/score_attribution")
    assert is_plot(split)
    assert f"{knocked.score_attribution(3, 1, 14, 2).score:+.4f}" in split["plot"]
    # a second cell joins the first
    client.predict(2, 3, 14, 8, api_name="/knockout")
    both = workspace.run("", PROMPT, Knockout(((2, 3, 14, 8), (2, 3, 14, 9))))
    assert both.attention(2).probs[3, 14, 8:10].eq(0).all()
    status, line, *_ = client.predict(api_name="/restore")
    assert "The cells are back" in status_text(status) and line == ""
    _, split, *_ = client.predict(3, 1, 14, 2, api_name="/score_attribution")
    assert f"{plain.score_attribution(3, 1, 14, 2).score:+.4f}" in split["plot"]


@pytest.mark.parametrize(
    ("cell", "message"),
    [
        ((2, 3, 4, 9), "key 9 comes after query 4"),
        ((2, 3, 99, 1), "query 99 is outside the sequence&#x27;s 29 positions"),
        ((2, 8, 14, 9), "head must be an integer in [0, 7]"),
        ((2, 3, 0, 0), "every key query 0 sees is blocked"),
    ],
)
def test_a_cell_that_cannot_be_knocked_out_is_a_clear_message(client, cell, message):
    status, line, *_ = client.predict(*cell, api_name="/knockout")
    assert message in status_text(status)
    assert not line or line.get("__type__") == "update"


def test_a_link_carries_the_cells_knocked_out_in_its_prompts_run_and_no_others():
    from explorer.app.ui import share

    on_screen = share.ViewState.on_page(
        layer=2, head=3, prompt=PROMPT, knockout=(PROMPT, "2.3:14-9,2.3:14-8")
    )
    link = share.query_string(on_screen)
    assert "knockout=2.3%3A14-9%2C2.3%3A14-8" in link
    assert share.read(link).knockout == "2.3:14-8,2.3:14-9"  # as Knockout.spelled writes it: sorted
    other = share.ViewState.on_page(layer=2, head=3, prompt="another prompt", knockout=(PROMPT, "2.3:14-9"))
    assert "knockout" not in share.query_string(other)  # the cells were of another prompt's run
    for wrong in ("2.3:14", "x.3:14-9", "2.3:14-9;2.3:1-0", "1" * 12 + ".0:1-0"):
        assert share.read(f"?prompt=a&knockout={wrong}").knockout == ""
    assert Knockout.read(" 2.3:14-9 , 2.3:14-9").cells == ((2, 3, 14, 9),)

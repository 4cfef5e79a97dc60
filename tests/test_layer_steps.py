"""The layers beside the one drawn, which the page's layer view keeps to step to with no request
(explorer/app/ui/common.py `neighbour_values`): each is the value a switch to it sends, of the same
view (run and map style), within the page's byte budget."""

from __future__ import annotations

import json

import pytest

import explorer
from explorer import views
from explorer.app import payload
from explorer.app.ui.common import layer_view_value, neighbour_values
from explorer.views import attention as view_attention
from explorer.views import pooled

PROMPT = "To be, or not to be, that is the question: whether 'tis nobler in the mind to suffer"


@pytest.fixture(scope="module")
def bundled():
    return explorer.load(device="cpu")


def test_the_layers_beside_one_are_the_values_a_switch_to_each_sends(bundled):
    run, style = bundled.run(PROMPT), views.MapStyle(log=True)
    last = run.config.n_layers - 1
    assert last >= 2
    values = neighbour_values(run, 1, 3, [0, 2], style, payload.NEIGHBOUR_BYTES)
    assert values == [layer_view_value(run, layer, 3, style, every_head=True) for layer in (0, 2)]
    assert [value["layer"] for value in values] == [0, 2] and all(v["thumbnails"] for v in values)
    assert {value["view"] for value in values} == {layer_view_value(run, 1, 3, style)["view"]}
    assert all(value["n_layers"] == last + 1 and value["head"] == 3 for value in values)
    # Only layers a step away that the model has: an ask for others (an API call may send any) is left out.
    assert neighbour_values(run, 0, 0, [-1, 1, 2, 5], style, payload.NEIGHBOUR_BYTES) == [
        layer_view_value(run, 1, 0, style, every_head=True)
    ]
    assert [v["layer"] for v in neighbour_values(run, last, 0, [last + 1, last - 1], style, 1 << 30)] == [
        last - 1
    ]


def test_the_neighbours_sent_fit_the_byte_budget(bundled):
    run, style = bundled.run(PROMPT), views.MapStyle()
    one = payload.value_bytes(layer_view_value(run, 0, 0, style, every_head=True))
    assert one == len(json.dumps(layer_view_value(run, 0, 0, style, True), separators=(",", ":")).encode())
    two = one + payload.value_bytes(layer_view_value(run, 2, 0, style, every_head=True))
    assert len(neighbour_values(run, 1, 0, [0, 2], style, two)) == 2
    assert len(neighbour_values(run, 1, 0, [0, 2], style, two - 1)) == 1
    assert neighbour_values(run, 1, 0, [0, 2], style, one - 1) == []


def test_a_view_is_one_run_drawn_in_one_style(bundled):
    run = bundled.run(PROMPT)
    key = payload.view_key(run, views.MapStyle())
    assert payload.view_key(bundled.run(PROMPT), views.MapStyle()) == key  # the same prompt run again
    assert payload.view_key(run, views.MapStyle(weighted=True)) != key
    assert payload.view_key(bundled.run(PROMPT + " too"), views.MapStyle()) != key


def test_past_the_view_budget_a_neighbour_sent_keeps_its_pass_for_its_other_heads(bundled, monkeypatch):
    """The page asks for a drawn layer's other heads: for a neighbour it drew from what it keeps, the
    server answers from the pass it kept when it sent it."""
    run = bundled.run(PROMPT * 3)
    monkeypatch.setattr(view_attention, "VIEW_MAP_BYTES", run.config.n_heads * run.n_tokens**2 * 4 // 10)
    assert not views.maps_fit(run)
    (value,) = neighbour_values(run, 0, 2, [1], views.MapStyle(), payload.NEIGHBOUR_BYTES)
    assert value["layer"] == 1 and pooled.kept_layer_views(run, 1) is not None
    monkeypatch.setattr(pooled, "layer_pass", lambda *a, **k: pytest.fail("the pass was computed again"))
    assert views.layer_figures(run, 1)


def test_what_the_page_asks_of_a_head_reads_the_event_or_the_pickers_for_an_api_call(bundled):
    """The layer view's `follow` and `head_picked` carry the layer and head (an API call sends no event
    data: the pickers' are read), and a layer and head outside the model are refused by name."""
    from explorer.app.ui.common import picked_head
    from explorer.app.ui.layer_view import FollowData, HeadData

    asked = FollowData(None, {"layer": 2, "head": 5, "drawn": True, "layer_changed": True})
    assert asked.override(0, 0) == (2, 5) and asked.drawn and asked.layer_changed
    api = FollowData(None, None)
    assert api.override(1, 3) == (1, 3) and not api.drawn and not api.layer_changed
    assert HeadData(None, {"layer": 1, "head": 0}).override(3, 3) == (1, 0)
    run = bundled.run("To be")
    assert picked_head(run, 1.0, 2) == (1, 2)
    with pytest.raises(ValueError, match=r"There is no layer 7, head 99 in this model \(4 layers of 8"):
        picked_head(run, 7, 99)
    with pytest.raises(ValueError, match="head must be a whole number, got 'x'"):
        picked_head(run, 1, "x")

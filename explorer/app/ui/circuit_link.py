"""The Circuit tab's part of the page's link: the settings that name the circuit on screen, and a
link's settings back into the tab's inputs."""

from __future__ import annotations

from urllib.parse import urlencode

from explorer.app import circuit_pairs
from explorer.app.ui import share
from explorer.engine import pairs, prompt_sets
from explorer.views import circuits as circuit_views


def settings(source, name, size, seed, typed, metric, methods, positions="heads") -> str:
    """The link's part naming a circuit: the built-in's name, size and seed, or the typed pairs (an
    uploaded CSV's pairs travel as typed ones), and the metric, methods and node positions."""
    params = {"circuit": name, "pairs_n": int(size), "seed": int(seed)} if source == "built-in" else {}
    if source != "built-in":
        params["pairs"] = typed
    params.update(metric=metric, methods=",".join(methods))
    if positions != "heads":
        params["positions"] = positions
    return urlencode(params)


def restored(t, params: dict) -> dict:
    """The inputs of the Circuit tab `t` a link's parameters name, by input."""
    if "circuit" not in params and "pairs" not in params:
        return {}
    if "pairs" in params:
        updates = {t.source: "typed", t.typed: params["pairs"][: circuit_pairs.MAX_BYTES]}
    else:
        updates = {t.source: "built-in"}
        if params["circuit"] in prompt_sets.BUILT_IN:
            updates[t.name] = params["circuit"]
        for box, name in ((t.size, "pairs_n"), (t.seed, "seed")):
            if (number := share.integer(params, name)) is not None:
                updates[box] = number
    if params.get("metric") in pairs.METRICS:
        updates[t.metric] = params["metric"]
    if methods := [m for m in params.get("methods", "").split(",") if m in circuit_views.METHODS]:
        updates[t.methods] = methods
    if params.get("positions") in circuit_views.POSITIONS:
        updates[t.positions] = params["positions"]
    return updates

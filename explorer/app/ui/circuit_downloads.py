"""The Circuit tab's downloads: the circuit on screen as CSV (its top edges, node scores and curve,
`views.circuits.to_csv`) and its graph per position, pruned as on screen, as versioned JSON
(`explorer.Graph.from_json` reads it), each written to the visitor's own download file."""

from __future__ import annotations

import gradio as gr

from explorer.app.ui.common import on_gpu
from explorer.app.ui.wiring import named
from explorer.app.visitors import visitor
from explorer.views import circuits as circuit_views

EXPORT_EDGES = 10_000  # the edges the CSV lists, best first (SmolLM2 has ~70,000; the rest score least)
DOWNLOAD_JS = "() => { document.querySelector('#circuit-download-file')?.click(); return null; }"


class CircuitDownloads:
    def __init__(self, events):
        """`events`: the tab's `CircuitEvents` (its tab, shared parts and circuit on screen)."""
        self.events = events
        self.tab, self.shared, self.workspace = events.tab, events.shared, events.workspace

    def wire(self) -> None:
        t, s = self.tab, self.shared
        on_screen = {"key": t.shown, "linked": t.linked}
        for button, export, read in (
            (t.csv, self.export, on_screen),
            (t.graph_json, self.export_graph, {**on_screen, "influence": t.influence}),
        ):
            button.click(*named(on_gpu(export, s.status), read), [s.status, t.download], api_name=False).then(
                None, None, t.download, js=DOWNLOAD_JS, api_name=False
            )

    def export(self, request: gr.Request, key, linked):
        shown = self.events.on_screen(key, linked)
        if shown is None:
            raise ValueError("Find the circuit first: the download is the circuit on screen.")
        return self.written(
            request, circuit_views.to_csv(shown.circuit, EXPORT_EDGES), "circuit.csv", "The circuit"
        )

    def export_graph(self, request: gr.Request, key, linked, influence=None):
        """The graph per position, pruned to the share of influence on screen (None: as found)."""
        shown = self.events.on_screen(key, linked)
        if shown is None or shown.circuit.graph is None:
            raise ValueError("Find a circuit with “graph per position” ticked: the download is its graph.")
        circuit = shown.circuit if influence is None else circuit_views.regraphed(shown.circuit, influence)
        return self.written(request, circuit.graph.to_json(), "graph.json", "The graph")

    def written(self, request: gr.Request, text: str, name: str, what: str) -> dict:
        """`text` in the visitor's download file `name`, offered by the tab's download button."""
        asking = visitor(request, self.workspace.policy.proxies)
        path = self.shared.downloads.path(asking, name, len(text.encode("utf-8")), what)
        path.write_text(text, encoding="utf-8")
        return {self.tab.download: str(path)}

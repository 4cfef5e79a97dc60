"""The Circuit tab: a dataset of prompt pairs (built-in from a name, size and seed; typed; or a CSV),
a metric and the methods to run (`explorer.views.circuits`): every head's output patched exactly, AtP's
estimate of the same beside it, EAP-IG's edges drawn as a graph with a slider for how many, and the
faithfulness curve of the circuits of the top edges, measured exactly.

- "Find the circuit" (/circuit) runs the methods ticked; "Patch the nodes" (/patch_nodes) the node
  sweep and AtP alone. Both take turns in the costly queue, one per visitor, their working memory
  reserved from `limits.circuit_cost`.
- The slider redraws the graph and marks the curve from the circuit on screen, with no new reading. The
  circuit is kept in the workspace's budget, the tab's state holding its key (`ui.sessions`): one
  dropped since says so.
- A click on a head of the node map or graph (the charts' `head_picked`, the page asking) puts the
  first pair's clean prompt in the prompt box, runs it and opens that head in the Attention tab.
- The page's link (`share.query_string`) carries the circuit on screen's settings (`linked`), and a
  link's settings come back into the tab's inputs as the page loads (`restore`; `ui.circuit_link`).
"""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from explorer.app import circuit_pairs, limits, markup
from explorer.app.circuit_pairs import FIRST
from explorer.app.ui import circuit_link, sessions, share
from explorer.app.ui import inputs as checked
from explorer.app.ui.circuit_downloads import CircuitDownloads
from explorer.app.ui.circuit_link import settings
from explorer.app.ui.common import COSTLY, EACH_TRIGGER, Shared, guarded, head_of, on_gpu, plot, sent
from explorer.app.ui.layer_view import HeadData
from explorer.app.ui.plot_view import PlotView, figure_view
from explorer.app.ui.wiring import named
from explorer.app.workspace import Workspace
from explorer.engine import pairs, prompt_sets
from explorer.engine.graph import NODE_THRESHOLD
from explorer.engine.patch_metrics import METRIC_NAMES
from explorer.errors import LimitError, PromptError
from explorer.views import attribution_graph as graph_views
from explorer.views import circuits as circuit_views

CIRCUIT_MAX_TOKENS = 128  # as a patching sweep's (explorer.app.ui.patching): circuits are read on short pairs
INTRO = (
    "### Find a circuit\nA dataset of prompt pairs: each clean prompt, a corrupted one of as many "
    "tokens, the answer and a distractor (single tokens). The exact node sweep patches each head's "
    "output from the clean run into the corrupted one; AtP estimates the same from one gradient; EAP-IG "
    "scores every edge between the heads and MLPs, and the circuit of the top edges is measured "
    "exactly. Recovered: 1 is the clean run's metric, 0 the corrupted run's. Click a head to open it."
)


@dataclass(frozen=True)
class Shown:
    """The circuit on screen: what was found, on which model, from which pairs, with which settings."""

    circuit: circuit_views.Circuit
    model: str
    pairs: prompt_sets.PromptSet
    settings: str  # the link's part that names them (urlencoded)


@dataclass(frozen=True, kw_only=True)
class CircuitTab:
    tab: gr.Tab
    source: gr.Radio
    name: gr.Dropdown
    size: gr.Number
    seed: gr.Number
    typed: gr.Textbox
    upload: gr.File
    pairs: gr.HTML  # the pairs of the circuit on screen, or of the built-in set picked
    metric: gr.Radio
    methods: gr.CheckboxGroup
    positions: gr.Radio  # where the node sweep and AtP patch each head (views.circuits.POSITIONS)
    find: gr.Button
    patch: gr.Button
    nodes: PlotView
    position_graph: PlotView  # the graph per position, pruned
    influence: gr.Slider  # the writers' share of influence it keeps (views.circuits.regraphed)
    graph_heads: gr.HTML  # its heads ranked by their edges' summed score, either way
    edges: gr.Slider
    graph: PlotView
    curve: PlotView
    csv: gr.Button
    graph_json: gr.Button  # the graph per position on screen, as `Graph.to_json` writes it
    download: gr.DownloadButton
    shown: gr.State  # the key of the Shown on screen, kept in the workspace (`ui.sessions`)
    linked: gr.State  # the link's part naming the circuit on screen ('' before one)

    def wire(self, shared: Shared, demo: gr.Blocks, model, prompt, run, runs: list) -> None:
        CircuitEvents(self, shared).wire(demo, model, prompt, run, runs)


def build(workspace: Workspace) -> CircuitTab:
    with gr.Tab("Circuit", elem_id="tab-circuit") as tab:
        gr.Markdown(INTRO)
        with gr.Row():
            source = checked.Radio(
                [(label, key) for key, label in circuit_pairs.SOURCES.items()],
                value="built-in",
                label="Dataset",
                elem_id="circuit-source",
            )
            name = checked.Dropdown(
                list(prompt_sets.BUILT_IN), value=FIRST.name, label="Built-in", elem_id="circuit-name"
            )
            most = circuit_pairs.MAX_PAIRS
            size = checked.Number(FIRST.size, label="Pairs", precision=0, minimum=1, maximum=most)
            seed = checked.Number(FIRST.seed, label="Seed", precision=0, minimum=0, elem_id="circuit-seed")
        typed = gr.Textbox(
            label="Typed pairs: clean | corrupted | answer | distractor, one a line",
            lines=4,
            max_lines=16,
            visible=False,
            elem_id="circuit-pairs",
        )
        upload = gr.File(
            label="CSV of pairs (clean, corrupted, answer, distractor)",
            file_types=[".csv"],
            type="filepath",
            height=100,
            visible=False,
            elem_id="circuit-csv",
        )
        shown_pairs = gr.HTML(circuit_pairs.opening(workspace), elem_id="circuit-pairs-table")
        with gr.Row():
            metric = checked.Radio(
                [(METRIC_NAMES[m], m) for m in pairs.METRICS], value="logit_diff", label="Metric", scale=2
            )
            methods = checked.CheckboxGroup(
                [(circuit_views.METHOD_NAMES[m], m) for m in circuit_views.METHODS],
                value=list(circuit_views.METHODS),
                label="Methods",
                elem_id="circuit-methods",
                scale=2,
            )
            positions = checked.Radio(
                [(label, key) for key, label in circuit_views.POSITIONS.items()],
                value="heads",
                label="Node scores: each head's output patched at",
                elem_id="circuit-positions",
                scale=2,
            )
            find = gr.Button("Find the circuit", variant="primary", elem_id="circuit-button", min_width=140)
            patch = gr.Button("Patch the nodes", elem_id="circuit-patch-button", min_width=140)
        nodes = figure_view(elem_id="circuit-nodes-plot")
        position_graph = figure_view(elem_id="circuit-position-graph-plot")
        influence = checked.Slider(
            circuit_views.INFLUENCE_STEP,
            1.0,
            value=NODE_THRESHOLD,
            step=circuit_views.INFLUENCE_STEP,
            label="Graph per position: the heads and MLPs that carry this share of its influence",
            elem_id="circuit-influence",
        )
        graph_heads = gr.HTML(elem_id="circuit-graph-heads")
        edges = checked.Slider(1, 100, value=10, step=1, label="Edges in the graph", elem_id="circuit-edges")
        graph = figure_view(elem_id="circuit-graph-plot")
        curve = figure_view(elem_id="circuit-curve-plot")
        with gr.Row():
            csv = gr.Button("The circuit (.csv)", size="sm", elem_id="circuit-csv-button")
            graph_json = gr.Button("The graph per position (.json)", size="sm", elem_id="circuit-json-button")
        download = gr.DownloadButton(elem_id="circuit-download-file", elem_classes="hidden-input")
    return CircuitTab(
        tab=tab,
        source=source,
        name=name,
        size=size,
        seed=seed,
        typed=typed,
        upload=upload,
        pairs=shown_pairs,
        metric=metric,
        methods=methods,
        positions=positions,
        find=find,
        patch=patch,
        nodes=nodes,
        position_graph=position_graph,
        influence=influence,
        graph_heads=graph_heads,
        edges=edges,
        graph=graph,
        curve=curve,
        csv=csv,
        graph_json=graph_json,
        download=download,
        shown=sessions.result_state(workspace),
        linked=gr.State(""),
    )


class CircuitEvents:
    def __init__(self, tab: CircuitTab, shared: Shared):
        self.tab, self.shared, self.workspace = tab, shared, shared.workspace

    def wire(self, demo: gr.Blocks, model, prompt, run, runs: list) -> None:
        t, s = self.tab, self.shared
        pair_set = {"source": t.source, "name": t.name, "size": t.size, "seed": t.seed}
        dataset = {**pair_set, "typed": t.typed, "upload": t.upload, "metric": t.metric}
        dataset |= {"methods": t.methods, "positions": t.positions, "model": model}
        drawn = [s.status, t.nodes, t.position_graph, t.graph_heads, t.graph, t.curve, t.edges, t.influence]
        drawn += [t.shown, t.linked, t.typed, t.pairs]
        self.prompt = prompt
        find = named(on_gpu(self.circuit, s.status), dataset)
        t.find.click(*find, drawn, api_name="circuit", **COSTLY)
        patch = named(on_gpu(self.patch_nodes, s.status), dataset)
        t.patch.click(*patch, drawn, api_name="patch_nodes", **COSTLY)
        chosen = [t.name, t.size, t.seed, t.typed, t.upload]  # the source's inputs show (a link's too)
        t.source.change(self.show_source, t.source, chosen, api_name=False)
        gr.on(  # a built-in set's pairs as soon as picked (a link's too), for the model loaded
            [t.source.change, t.name.change, t.size.change, t.seed.change, model.change],
            *named(guarded(s.status)(self.preview), {**pair_set, "model": model}),
            t.pairs,
            api_name=False,
        )
        on_screen = {"key": t.shown, "linked": t.linked}
        for (
            slider,
            read_as,
            show,
            redrawn,
        ) in (  # each redraws from the circuit on screen, with no new reading
            (t.edges, "kept", self.show_edges, [t.graph, t.curve]),
            (t.influence, "influence", self.show_influence, [t.position_graph, t.graph_heads]),
        ):
            slider.input(
                *named(guarded(s.status)(show), {**on_screen, read_as: slider}),
                [s.status, *redrawn],
                api_name=False,
                trigger_mode="always_last",
            )
        clicked = gr.on(
            [t.nodes.head_picked, t.position_graph.head_picked, t.graph.head_picked],
            *named(guarded(s.status)(self.open_head), {**on_screen, "model": model}),
            [s.status, prompt, s.layer, s.head, s.shown],
            api_name=False,
            **EACH_TRIGGER,
        )
        runs.append(run.after(clicked))
        self.downloads = CircuitDownloads(self)
        self.downloads.wire()
        demo.load(
            self.restore,
            None,
            [t.source, t.name, t.size, t.seed, t.typed, t.metric, t.methods, t.positions],
            api_name=False,
        )

    # --- the readings ---------------------------------------------------------------------------------

    def circuit(
        self, request: gr.Request, source, name, size, seed, typed, upload, metric, methods, positions, model
    ):
        """Find the circuit (and /circuit): the methods ticked on the dataset."""
        chosen = (source, name, size, seed, typed, upload)
        return self.compute(request, *chosen, metric, methods, positions, model)

    def patch_nodes(
        self, request: gr.Request, source, name, size, seed, typed, upload, metric, methods, positions, model
    ):
        """Patch the nodes (and /patch_nodes): the exact node sweep, and AtP beside it where ticked."""
        methods = ["exact", *(["atp"] if "atp" in (methods or ()) else [])]
        chosen = (source, name, size, seed, typed, upload)
        return self.compute(request, *chosen, metric, methods, positions, model)

    def compute(self, request, source, name, size, seed, typed, upload, metric, methods, positions, model):
        methods = [m for m in circuit_views.METHODS if m in (methods or ())]
        if not methods:
            raise PromptError("Tick at least one method.")
        if metric not in pairs.METRICS:
            raise PromptError(f"There is no metric {metric!r}: {', '.join(pairs.METRICS)}.")
        explorer = self.workspace.explorer(model, load=False)
        chosen = circuit_pairs.chosen(source, name, size, seed, typed, upload, explorer.tokenizer)
        data = pairs.dataset(explorer, *chosen.args(), metric=metric)  # names a pair of unequal length
        n_tokens = max(batch.n_tokens for batch in data.batches)
        if n_tokens > CIRCUIT_MAX_TOKENS:
            raise LimitError(
                f"A prompt has {n_tokens:,} tokens: this app finds circuits on prompts of up to "
                f"{CIRCUIT_MAX_TOKENS} (the Python API, ex.edge_attribution, takes the model's context)."
            )
        if positions not in circuit_views.POSITIONS:
            raise PromptError(
                f"There is no choice of positions {positions!r}: {', '.join(circuit_views.POSITIONS)}."
            )
        at = circuit_views.positions_of(data, positions)
        bound, names = self.workspace.policy.request_seconds, circuit_views.METHOD_NAMES
        limits.circuit_time(explorer, data, methods, at, bound, names, circuit_views.EAP_STEPS)
        cost = limits.circuit_cost(explorer.config, data.size, n_tokens, methods, at)
        with self.shared.readings.reading(request, cost):
            work = limits.circuit_work(explorer.config, data, methods, at, circuit_views.EAP_STEPS)
            listed = pairs.listed_pairs(*chosen.args())
            found = circuit_views.find(explorer, data, methods, positions=at, work=work, listed=listed)
        link = settings(source, name, size, seed, circuit_pairs.as_text(chosen), metric, methods, positions)
        shown = Shown(found, model, chosen, link)
        kept = circuit_views.edge_count(found, circuit_views.DEFAULT_EDGES)
        total = len(found.edges or ())
        message = circuit_views.summary(found, data.size, methods, kept)
        t = self.tab
        key = sessions.keep(self.workspace, request, "circuit", shown)
        updates = {self.shared.status: markup.status(message, "info"), t.shown: key, t.linked: link}
        updates[t.nodes] = self.drawn(circuit_views.node_scores(found), "nodes")
        updates |= self.graph_per_position(found)
        updates[t.influence] = found.graph_influence
        updates |= self.figures(found, kept)
        if total:
            updates[t.edges] = gr.update(maximum=total, value=kept)
        updates[t.pairs] = circuit_pairs.table(chosen, source, seed)
        if source == "csv":  # the pairs read, to look at and edit
            updates[t.typed] = circuit_pairs.as_text(chosen)
        return updates

    def figures(self, found: circuit_views.Circuit, kept: int) -> dict:
        """The circuit's graph and faithfulness curve with its first `kept` edges."""
        graph, curve = circuit_views.graph(found, kept), circuit_views.curve(found, kept)
        return {self.tab.graph: self.drawn(graph, "graph"), self.tab.curve: self.drawn(curve, "faithfulness")}

    def graph_per_position(self, found: circuit_views.Circuit) -> dict:
        """The graph per position and its heads ranked."""
        t = self.tab
        ranked = [] if found.graph is None else graph_views.ranked_heads(found.graph)
        return {
            t.position_graph: self.drawn(circuit_views.position_graph(found), "graph-per-position"),
            t.graph_heads: markup.graph_heads(ranked) if ranked else "",
        }

    @staticmethod
    def drawn(fig, what: str):
        return None if fig is None else plot(fig, f"circuit-{what}")

    # --- what is on screen ---------------------------------------------------------------------------

    def show_source(self, source):
        """The chosen source's inputs: the built-in's name, size and seed, or the typed pairs (which
        show a CSV's pairs once read), and the upload for a CSV."""
        t, built_in = self.tab, source == "built-in"
        return {
            **{box: gr.update(visible=built_in) for box in (t.name, t.size, t.seed)},
            t.typed: gr.update(visible=not built_in),
            t.upload: gr.update(visible=source == "csv"),
        }

    def preview(self, source, name, size, seed, model):
        """The built-in set's pairs, before a reading; typed or CSV pairs show once read."""
        if source != "built-in":
            return ""
        return circuit_pairs.preview(name, size, seed, self.workspace.explorer(model, load=False).tokenizer)

    def on_screen(self, key, linked) -> Shown | None:
        """The circuit on screen, None before one is found (nothing `linked`), or why it is gone."""
        return sessions.on_screen(self.workspace, key, bool(linked), "The circuit", "Find the circuit again.")

    def show_edges(self, key, linked, kept):
        shown = self.on_screen(key, linked)
        if shown is None or not shown.circuit.edges:
            return {}
        kept = max(1, min(int(kept), len(shown.circuit.edges)))
        return self.figures(shown.circuit, kept)

    def show_influence(self, key, linked, influence):
        """The graph per position pruned again to the writers carrying `influence` of it."""
        shown = self.on_screen(key, linked)
        if shown is None or shown.circuit.graph_whole is None:
            return {}
        return self.graph_per_position(circuit_views.regraphed(shown.circuit, influence))

    def open_head(self, key, linked, model, asked: HeadData):
        """A click on a head of the node map or graph: the first pair's clean prompt, that layer and head."""
        shown = None if asked.layer is None else self.on_screen(key, linked)
        if shown is None:
            return {}
        if shown.model != model:
            raise ValueError("This circuit is of another model than the one loaded: find it again.")
        layer, head = head_of(shown.circuit.n_layers, shown.circuit.n_heads, asked.layer, asked.head)
        s = self.shared
        return {self.prompt: shown.pairs.clean[0], s.layer: layer, s.head: head, s.shown: None}

    def restore(self, request: gr.Request):
        """A link's circuit settings into the tab's inputs (each kept as it is where the link is silent)."""
        return sent(self.restored(share.requested(request)))

    def restored(self, params: dict) -> dict:
        """The inputs a link's parameters name, by input (`circuit_link.restored`)."""
        return circuit_link.restored(self.tab, params)

"""The Circuit tab in Chromium on the bundled model: the built-in set's pairs shown as it is picked and
those a node patching ran on (against a baseline screenshot); typed pairs found as a circuit (node map
against the engine, graph, faithfulness curve, the pairs it ran on), the tab against a baseline
screenshot, and a click on a head of
the node map opening it in the Attention tab; then each head at each of the last 4 positions (the node
map against the engine, a click on a cell opening its head); and "Copy link" naming the circuit on
screen, whose link opens the tab with its pairs and settings."""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import numpy as np
import pytest
from browser_support import AppPage, match_baseline, settle
from test_browser_intervene import JS_HEATMAP

from explorer.app import circuit_pairs
from explorer.engine import pairs
from explorer.views import circuits as circuit_views

pytestmark = pytest.mark.browser

PLOTS = ["circuit-nodes-plot", "circuit-position-graph-plot", "circuit-graph-plot", "circuit-curve-plot"]
TYPED = (
    "To be, or not to be, that is the question: whether the | "
    "To be, or not or be, that is the question: whether the | to | be\n"
    "The king of the castle sat on the | The queen of the castle sat on the | king | queen"
)


def shown_pairs(app: AppPage) -> list[list[str]]:
    """The pairs table's rows as the page shows them: number, clean, corrupted, answer, distractor."""
    cells = "(row) => [...row.querySelectorAll('td')].map((cell) => cell.textContent)"
    return app.page.locator("#circuit-pairs-content tbody tr").evaluate_all(f"(rows) => rows.map({cells})")


def find_circuit(app: AppPage) -> None:
    app.page.get_by_role("tab", name="Circuit", exact=True).click()
    app.page.locator("#circuit-source").get_by_text("Typed pairs", exact=True).click()
    app.page.locator("#circuit-pairs textarea").fill(TYPED)
    app.remember_plots()
    app.page.locator("#circuit-button").click()
    app.wait_drawn(PLOTS)
    settle(app)


def open_cell(app: AppPage, row: int, column: int) -> None:
    """Click a cell of the node map and wait for its head to open in the Attention tab."""
    app.remember_plots()
    app.click_cell("circuit-nodes-plot", 1, row, column)
    app.wait_redrawn(["pipeline-plot"])
    settle(app)
    app.wait_for_tab("Attention")


def test_typed_pairs_draw_the_circuit_match_the_baseline_and_a_head_opens(app, browser_workspace):
    find_circuit(app)
    ex = browser_workspace.explorer("")
    data = pairs.dataset(ex, *circuit_pairs.typed(TYPED).args())
    found = circuit_views.find(ex, data, ["exact"])
    drawn = np.array(app.page.evaluate(JS_HEATMAP, ["circuit-nodes-plot", 0]), dtype=np.float64)
    np.testing.assert_allclose(drawn, found.recovered(found.exact), atol=1e-4)
    assert "2 pairs" in app.status() and "edges scored" in app.status()
    assert (
        "The circuit on screen ran on 2 pairs typed" in app.page.locator("#circuit-pairs-table").inner_text()
    )
    assert [row[1] for row in shown_pairs(app)] == [line.split(" | ")[0] for line in TYPED.splitlines()]
    match_baseline(app.screenshot(app.page.locator("#tab-circuit"), []), "view-circuit-drawn")

    layer, head = np.unravel_index(np.nanargmax(drawn), drawn.shape)
    open_cell(app, int(layer), int(head))
    assert app.page.locator("#pipeline-plot").is_visible()
    assert app.title("pipeline-plot").startswith(f"Layer {layer} · head {head} ")
    assert app.page.locator("#prompt textarea").input_value() == TYPED.split(" | ")[0]
    assert app.page.locator("#back-to-chart").inner_text() == "← Back to Circuit"

    app.page.locator("#back-to-chart").click()
    app.wait_for_tab("Circuit")
    app.page.locator("#circuit-positions").get_by_text("each of the last 4 positions", exact=True).click()
    app.remember_plots()
    app.page.locator("#circuit-patch-button").click()
    app.wait_redrawn(["circuit-nodes-plot"])
    settle(app)
    at = circuit_views.positions_of(data, "last")
    per_position = circuit_views.find(ex, data, ["exact"], positions=at)
    drawn = np.array(app.page.evaluate(JS_HEATMAP, ["circuit-nodes-plot", 0]), dtype=np.float64)
    want = per_position.recovered(per_position.exact).reshape(ex.config.n_layers, -1)
    np.testing.assert_allclose(drawn, want, atol=1e-4)
    layer, column = np.unravel_index(np.nanargmax(drawn), drawn.shape)
    open_cell(app, int(layer), int(column))
    assert app.title("pipeline-plot").startswith(f"Layer {layer} · head {column // len(at)} ")
    assert not app.problems()


# The graph per position's traces of a role ("nodes", "attention"): each point's text, customdata and
# where it is on the page (the card's scroll settled)
JS_GRAPH_POINTS = """([id, role]) => {
    const gd = document.querySelector(`#${id} .js-plotly-plot`);
    const index = gd.data.findIndex((trace) => trace.meta && trace.meta.role === role);
    const trace = gd._fullData[index], xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
    const box = gd.querySelector('.main-svg').getBoundingClientRect();
    return gd.calcdata[index].map((point, i) => ({  // x and y decoded from the typed arrays sent
        text: trace.text[i], data: [...trace.customdata[i]],
        x: box.left + xa._offset + xa.d2p(point.x), y: box.top + ya._offset + ya.d2p(point.y),
    }));
}"""
JS_NODE_LABELS = """(id) => [...document.querySelectorAll(`#${id} .textpoint text`)]
    .filter((text) => text.getBoundingClientRect().width > 0).map((text) => text.textContent)"""
JS_LIT = """(id) => {  // the lit paths' edges (line shapes), and the nodes dimmed
    const gd = document.querySelector(`#${id} .js-plotly-plot`);
    const opacity = gd.data.find((trace) => trace.meta && trace.meta.role === "nodes").marker.opacity;
    return {
        edges: (gd.layout.shapes || []).filter((shape) => shape.name === "lit").length,
        dimmed: Array.isArray(opacity) ? opacity.filter((o) => o < 1).length : 0,
    };
}"""
JS_MEETING_LABELS = """(id) => {  // node labels drawn over each other or over another node's marker,
    // and tokens of the x axis drawn over each other
    const gd = document.querySelector(`#${id} .js-plotly-plot`);
    const index = gd.data.findIndex((trace) => trace.meta && trace.meta.role === "nodes");
    const trace = gd.querySelectorAll(".scatterlayer .trace")[index];
    const boxes = (root, selector) => [...root.querySelectorAll(selector)]
        .map((element) => element.getBoundingClientRect());
    const meet = (p, q) => Math.min(p.right, q.right) - Math.max(p.left, q.left) > 1
        && Math.min(p.bottom, q.bottom) - Math.max(p.top, q.top) > 1;
    const labels = boxes(trace, ".textpoint text"), markers = boxes(trace, ".point");
    const names = [...trace.querySelectorAll(".textpoint text")].map((text) => text.textContent);
    const meeting = [];
    labels.forEach((p, i) => {
        labels.slice(i + 1).forEach((q, j) => meet(p, q) && meeting.push([names[i], names[i + 1 + j]]));
        markers.forEach((q, j) => j !== i && meet(p, q) && meeting.push([names[i], `marker of ${names[j]}`]));
    });
    const ticks = [...gd.querySelectorAll(".xtick text")];
    const tickBoxes = ticks.map((tick) => tick.getBoundingClientRect());
    tickBoxes.forEach((p, i) => tickBoxes.slice(i + 1).forEach((q, j) =>
        meet(p, q) && meeting.push([ticks[i].textContent, ticks[i + 1 + j].textContent])));
    return meeting;
}"""
JS_TICKS = """(id) => [...document.querySelectorAll(`#${id} .xtick text`)].map((tick) => tick.textContent)"""


def test_the_graph_per_position_names_its_nodes_and_an_attention_edge_opens_why_at_its_cell(
    app, browser_workspace
):
    """The graph per position of the first typed pair (both pairs differ in length: the first's length
    is read): every node labelled, the x axis the prompt's tokens; a click on an attention edge opens
    its head on that prompt in the Attention tab, with Why this score at its (query, key)."""
    find_circuit(app)
    plot = "circuit-position-graph-plot"
    app.page.locator(f"#{plot}").scroll_into_view_if_needed()
    few = len(app.page.evaluate(JS_GRAPH_POINTS, [plot, "nodes"]))
    app.remember_plots()  # the influence slider prunes the graph again
    box = app.page.locator("#circuit-influence input[type=number]")
    box.fill("0.95")
    box.press("Enter")
    app.wait_redrawn([plot])
    assert "carrying 95% of its influence" in app.title(plot)
    nodes = app.page.evaluate(JS_GRAPH_POINTS, [plot, "nodes"])
    assert len(nodes) >= few
    assert nodes and all(node["text"].strip() for node in nodes)
    assert {"logits", "MLP 0"} <= {node["text"] for node in nodes}
    clean = TYPED.split(" | ")[0]
    ticks = app.page.evaluate(JS_TICKS, plot)  # the prompt's tokens, one a position
    tokens = browser_workspace.explorer("").run(clean).tokens
    assert len(ticks) == len(tokens) and "question" in ticks[tokens.index(" question")]

    # hovering a head lights the paths through it and dims the rest; a click pins it
    card = app.page.locator(f"#{plot}").bounding_box()  # a graph wider than its card scrolls sideways

    def in_sight(point: dict) -> bool:
        return card["x"] + 20 < point["x"] < card["x"] + card["width"] - 20

    head_node = next(node for node in nodes if node["data"][0] >= 0 and in_sight(node))
    box = app.page.locator(f"#{plot} .gtitle").bounding_box()
    app.page.mouse.move(head_node["x"], head_node["y"], steps=2)
    app.page.wait_for_function(f"(id) => ({JS_LIT})(id).edges > 0", arg=plot)
    lit = app.page.evaluate(JS_LIT, plot)
    assert 0 < lit["dimmed"] < len(nodes)
    app.page.mouse.move(box["x"], box["y"], steps=2)  # away: nothing lit
    app.page.wait_for_function(f"(id) => ({JS_LIT})(id).edges === 0", arg=plot)
    app.page.mouse.move(head_node["x"], head_node["y"], steps=2)
    app.page.wait_for_function(f"(id) => ({JS_LIT})(id).edges > 0", arg=plot)
    app.page.mouse.click(head_node["x"], head_node["y"])  # pinned: it stays lit, the tab stays
    app.page.mouse.move(box["x"], box["y"], steps=2)
    app.page.wait_for_timeout(300)
    assert app.page.evaluate(JS_LIT, plot) == lit
    assert app.page.locator("#tab-circuit").is_visible()

    marks = app.page.evaluate(JS_GRAPH_POINTS, [plot, "attention"])
    edges = [  # one clear of every other point Plotly could hover there
        edge
        for edge in marks
        if edge["data"][2] > edge["data"][3]
        and in_sight(edge)
        and all(abs(edge["x"] - o["x"]) + abs(edge["y"] - o["y"]) > 12 for o in marks + nodes if o != edge)
    ]
    layer, head, query, key = edges[0]["data"]
    app.remember_plots()
    app.page.mouse.move(edges[0]["x"], edges[0]["y"], steps=2)
    app.page.wait_for_function(  # Plotly clicks the point it hovers
        """([id, cell]) => (document.querySelector(`#${id} .js-plotly-plot`)._hoverdata || [])
            .some((point) => JSON.stringify([...(point.customdata || [])]) === JSON.stringify(cell))""",
        arg=[plot, edges[0]["data"]],
    )
    app.page.mouse.click(edges[0]["x"], edges[0]["y"])
    app.wait_for_tab("Attention")
    app.page.wait_for_function(
        """(want) => ["layer", "head", "query", "key"].every((name, i) =>
            Number(document.querySelector(`#score-${name} input`)?.value) === want[i])
            && document.querySelector("#why-split-plot .js-plotly-plot")""",
        arg=[layer, head, query, key],
        timeout=60_000,
    )
    assert app.page.locator("#why-score").is_visible()
    assert app.page.locator("#prompt textarea").input_value() == clean
    assert app.title("pipeline-plot").startswith(f"Layer {layer} · head {head} ")

    app.page.locator("#back-to-chart").click()  # and a row of the graph's ranked heads opens its head
    app.wait_for_tab("Circuit")
    row = app.page.locator("#graph-heads-content tr.graph-head").last
    layer, head = int(row.get_attribute("data-layer")), int(row.get_attribute("data-head"))
    app.remember_plots()
    row.click()
    app.wait_for_tab("Attention")
    app.wait_redrawn(["why-split-plot"])  # the head's top cell split (the title may name it already)
    app.page.wait_for_function(
        "(want) => document.querySelector('#pipeline-plot .gtitle')?.textContent.startsWith(want)",
        arg=f"Layer {layer} · head {head} ",
        timeout=60_000,
    )
    settle(app)
    assert not app.problems()


JS_LINK = "() => (document.querySelector('#share-link textarea, #share-link input') || {}).value"
JS_CHECKED = """(id) => [...document.querySelectorAll(`#${id} input:checked`)]
    .map((box) => box.closest('label').textContent.trim())"""


def test_copy_link_names_the_circuit_on_screen_and_its_link_opens_the_tab_with_its_pairs(app):
    """Once a circuit is found, "Copy link" names the tab, its typed pairs, metric and methods; the
    link, opened in a new page, opens the Circuit tab with those pairs and settings in its inputs."""
    find_circuit(app)
    methods = app.page.evaluate(JS_CHECKED, "circuit-methods")
    app.page.locator("#copy-link").click()
    app.page.wait_for_function(JS_LINK, timeout=30_000)
    link = app.page.locator("#share-link textarea, #share-link input").first.input_value()
    params = parse_qs(urlparse(link).query)
    typed = circuit_pairs.as_text(circuit_pairs.typed(TYPED))  # the pairs as the tab read them
    assert params["tab"] == ["circuit"] and params["pairs"] == [typed]
    assert "metric" in params and params["methods"][0].split(",") != [""]

    opened = AppPage(app.page.context.new_page(), app.url)
    try:
        opened.page.goto(link)
        opened.wait_for_tab("Circuit")
        pairs_box = opened.page.locator("#circuit-pairs textarea")
        opened.page.wait_for_function(
            "(want) => document.querySelector('#circuit-pairs textarea')?.value === want", arg=typed
        )
        assert pairs_box.input_value() == typed
        assert opened.page.evaluate(JS_CHECKED, "circuit-source") == ["Typed pairs"]
        assert opened.page.evaluate(JS_CHECKED, "circuit-methods") == methods
        assert not opened.problems()
    finally:
        opened.page.close()
    assert not app.problems()


def test_a_built_in_set_shows_its_pairs_as_picked_and_a_node_patching_the_pairs_it_ran_on(
    app, browser_workspace
):
    """The tab opens with the IOI set's pairs for the model loaded; a new seed shows that seed's; "Patch
    the nodes" says those are the pairs it ran on (baseline screenshot); typed pairs show once read."""
    tokenizer = browser_workspace.explorer("").tokenizer
    app.page.get_by_role("tab", name="Circuit", exact=True).click()
    table = app.page.locator("#circuit-pairs-table")
    assert "8 pairs of the built-in ioi set, seed 0" in table.inner_text()
    app.page.locator("#circuit-seed input").fill("3")
    app.page.locator("#circuit-seed input").press("Enter")
    table.filter(has_text="seed 3").wait_for()
    made = circuit_pairs.built_in("ioi", 8, 3, tokenizer)
    rows = zip(made.clean, made.corrupted, made.answers, made.distractors, strict=True)
    want = [
        [str(i), clean, corrupted, f"“{a}”", f"“{d}”"] for i, (clean, corrupted, a, d) in enumerate(rows, 1)
    ]
    assert shown_pairs(app) == want
    marked = app.page.locator("#circuit-pairs-content mark").all_inner_texts()
    assert marked == [
        (set(b.split()) - set(a.split())).pop() for a, b in zip(made.clean, made.corrupted, strict=True)
    ]

    app.remember_plots()
    app.page.locator("#circuit-patch-button").click()
    app.wait_redrawn(["circuit-nodes-plot"])
    settle(app)
    assert "The circuit on screen ran on 8 pairs of the built-in ioi set, seed 3" in table.inner_text()
    assert shown_pairs(app) == want
    match_baseline(app.screenshot(table, []), "circuit-pairs")

    app.page.locator("#circuit-source").get_by_text("Typed pairs", exact=True).click()
    app.page.wait_for_function("() => !document.querySelector('#circuit-pairs-content')")
    assert not app.problems()


def test_smollm2s_built_in_ioi_graph_names_every_node_over_the_prompts_tokens(app, smollm2_path):
    """SmolLM2 picked, the built-in IOI set's graph per position alone: it reads the largest group of
    pairs of one length, every node has a visible label, the axis shows the first such pair's tokens,
    and name movers at the last position write into the logits (baseline screenshot of the graph)."""
    from test_browser_intervene import SMOLLM2_TIMEOUT_MS

    from explorer.loading.catalog import SMOLLM2_LABEL

    box = app.page.locator("#model-source input")
    box.fill(SMOLLM2_LABEL)
    box.press("Enter")
    card = app.page.locator("#model-card")
    card.filter(has_text="SmolLM2-135M-Instruct").filter(has_text="Loaded in").wait_for(
        timeout=SMOLLM2_TIMEOUT_MS
    )
    settle(app)
    app.page.get_by_role("tab", name="Circuit", exact=True).click()
    methods = app.page.locator("#circuit-methods")
    for name in ("exact node sweep", "AtP", "EAP-IG"):
        methods.get_by_text(name, exact=True).click()  # unticked: the graph alone
    plot = "circuit-position-graph-plot"
    app.remember_plots()
    app.page.locator("#circuit-button").click()
    app.wait_drawn([plot])
    settle(app)
    assert "The graph per position reads the" in app.status()
    app.page.locator(f"#{plot}").scroll_into_view_if_needed()
    nodes = app.page.evaluate(JS_GRAPH_POINTS, [plot, "nodes"])
    shown = app.page.evaluate(JS_NODE_LABELS, plot)  # the labels drawn, as many as the nodes
    assert len(shown) == len(nodes) and all(label.strip() for label in shown)
    assert {"logits", "23.3"} <= set(shown)
    assert app.page.evaluate(JS_MEETING_LABELS, plot) == []
    ticks = app.page.evaluate(JS_TICKS, plot)
    assert ticks[0] == "When" and ticks[-1].strip() == "to"
    match_baseline(app.screenshot(app.page.locator(f"#{plot}"), []), "circuit-graph-smollm2-ioi")
    assert not app.problems()

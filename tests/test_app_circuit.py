"""The Circuit tab: its views and figures against the engine, its CSV and typed pairs under hostile
input, its handlers (/circuit, /patch_nodes) served on the bundled model, its cost model and links."""

from __future__ import annotations

import codecs
import csv
import html
import inspect
import io
import re
import socket
from types import SimpleNamespace
from urllib.parse import parse_qsl

import gradio as gr
import numpy as np
import pytest
from gradio_client import Client
from test_app import sent_arrays

from explorer.app import circuit_pairs, limits
from explorer.app.ui import build_demo, share
from explorer.app.ui import circuit as circuit_tab
from explorer.app.workspace import Workspace
from explorer.engine import pairs
from explorer.engine.graph import NODE_THRESHOLD
from explorer.errors import LimitError, PromptError
from explorer.views import attribution_graph as graph_views
from explorer.views import circuits as circuit_views

CLEAN = "To be, or not to be, that is the question: whether the"
CORRUPTED = "To be, or not or be, that is the question: whether the"  # as many tokens
TYPED = f"{CLEAN} | {CORRUPTED} | to | be"
METHODS = list(circuit_views.METHODS)


@pytest.fixture(scope="module")
def workspace():
    return Workspace()  # the bundled model: 4 layers of 8 heads, 2 kv heads


@pytest.fixture(scope="module")
def found(workspace):
    ex = workspace.explorer("")
    data = pairs.dataset(ex, *circuit_pairs.typed(TYPED).args())
    return circuit_views.find(ex, data, METHODS)


@pytest.fixture(scope="module")
def per_position(workspace):
    ex = workspace.explorer("")
    data = pairs.dataset(ex, *circuit_pairs.typed(TYPED).args())
    return circuit_views.find(ex, data, ["exact", "atp"], positions=circuit_views.positions_of(data, "last"))


@pytest.fixture(scope="module")
def client(workspace):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    demo = build_demo(workspace)
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
    try:
        yield Client(demo.local_url, verbose=False)
    finally:
        demo.close()


def text_of(status: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", status))


# --- the views and figures ---


def test_the_views_read_the_engines_readings(workspace, found):
    ex = workspace.explorer("")
    args = circuit_pairs.typed(TYPED).args()
    exact = ex.patch_nodes(*args, nodes=circuit_views.head_nodes(ex.config)).numpy()
    np.testing.assert_allclose(found.exact.ravel(), exact, atol=1e-5)
    atp = ex.attribution_patching(*args, nodes=circuit_views.head_nodes(ex.config)).numpy()
    np.testing.assert_allclose(found.atp.ravel(), atp, atol=1e-5)
    edges = ex.edge_attribution(*args).edges
    assert [e[:2] for e in found.edges[:20]] == [e[:2] for e in edges[:20]]
    # every edge kept is the clean run, none the corrupted one; the curve's ends are theirs
    assert found.curve[0] == (0, pytest.approx(found.corrupted)) and found.curve[-1][0] == len(edges)
    assert found.clean == pytest.approx(ex.circuit_metric(*args, edges=edges), abs=1e-4)
    assert found.corrupted == pytest.approx(ex.circuit_metric(*args, edges=[]), abs=1e-4)


def test_the_node_map_shows_atp_beside_exact_as_recovered_fractions(found):
    fig = circuit_views.node_scores(found).figure()
    exact, atp = fig.data
    assert exact.type == atp.type == "heatmap" and exact.xaxis == "x" and atp.xaxis == "x2"
    span = found.clean - found.corrupted
    np.testing.assert_allclose(exact.z, (found.exact - found.corrupted) / span, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(atp.z, found.atp / span, rtol=1e-4, atol=1e-6)
    assert exact.zmin == -exact.zmax and exact.zmid == 0
    only_exact = circuit_views.Circuit(**{**vars(found), "atp": None})
    assert len(circuit_views.node_scores(only_exact).data) == 1


def test_node_scores_per_position_are_the_engines_and_drawn_head_by_position(workspace, per_position):
    ex, found = workspace.explorer(""), per_position
    args = circuit_pairs.typed(TYPED).args()
    assert found.positions == (-4, -3, -2, -1)
    nodes = circuit_views.head_nodes(ex.config, found.positions)
    assert nodes[:5] == [("z", 0, 0, -4), ("z", 0, 0, -3), ("z", 0, 0, -2), ("z", 0, 0, -1), ("z", 0, 1, -4)]
    shape = (ex.config.n_layers, ex.config.n_heads, 4)
    exact = ex.patch_nodes(*args, nodes=nodes).numpy().reshape(shape)
    atp = ex.attribution_patching(*args, nodes=nodes).numpy().reshape(shape)
    np.testing.assert_allclose(found.exact, exact, atol=1e-5)
    np.testing.assert_allclose(found.atp, atp, atol=1e-5)
    fig = circuit_views.node_scores(found).figure()
    drawn_exact, drawn_atp = fig.data
    span = found.clean - found.corrupted
    columns = (ex.config.n_layers, ex.config.n_heads * 4)
    np.testing.assert_allclose(drawn_exact.z, ((exact - found.corrupted) / span).reshape(columns), atol=1e-5)
    np.testing.assert_allclose(drawn_atp.z, (atp / span).reshape(columns), atol=1e-5)
    assert drawn_exact.zmax == drawn_atp.zmax == -drawn_exact.zmin  # one colour scale
    # column 4·head + p is that head at position p; its hover names layer, head and the token there
    assert list(drawn_exact.customdata[2][4 * 3 + 1][:2]) == [2, 3]
    assert drawn_exact.customdata[2][4 * 3 + 1][2] == f"-3 ‘{found.position_tokens[1]}’"
    assert found.position_tokens[-1] == ex.tokenizer.decode([ex.tokenizer.encode(CLEAN).ids[-1]])
    assert "layer %{customdata[0]} · head %{customdata[1]}" in drawn_exact.hovertemplate
    rows = list(csv.DictReader(io.StringIO(circuit_views.to_csv(found, 0))))
    exact_rows = [row for row in rows if row["section"] == "exact"]
    assert len(exact_rows) == exact.size
    assert [row["position_from_end"] for row in exact_rows[:4]] == ["-4", "-3", "-2", "-1"]
    assert float(exact_rows[1]["value"]) == pytest.approx(float(exact[0, 0, 1]), rel=1e-5)


def test_positions_from_the_first_difference_reach_back_to_it(workspace):
    ex = workspace.explorer("")
    data = pairs.dataset(ex, *circuit_pairs.typed(TYPED).args())
    n, first = data.batches[0].n_tokens, data.batches[0].first_difference
    assert circuit_views.positions_of(data, "differ") == tuple(range(-min(n - first, 16), 0))
    assert circuit_views.positions_of(data, "heads") is None
    with pytest.raises(ValueError, match="no choice of positions"):
        circuit_views.positions_of(data, "all of them")


def test_the_graph_keeps_as_many_edges_as_the_slider_and_tells_q_k_v_apart(found):
    fig = circuit_views.graph(found, 30).figure()
    lines = [t for t in fig.data if t.mode == "lines" and t.name]
    assert sum(len([x for x in t.x if x is None]) for t in lines) == 30
    kinds = {d[0] for _, d, _ in found.edges[:30]}
    assert {t.name for t in lines} == {f"into {kind}" for kind in kinds}
    colours = {t.name: t.line.color for t in lines}
    assert len(set(colours.values())) == len(colours)  # each input its own colour
    heads = next(t for t in fig.data if t.mode == "markers")
    assert all(len(point) == 2 for point in heads.customdata)  # (layer, head): a click opens it


def test_the_faithfulness_curve_runs_from_corrupted_to_clean(found):
    fig = circuit_views.curve(found, 41).figure()
    (line,) = fig.data
    assert line.y[0] == pytest.approx(0) and line.y[-1] == pytest.approx(1)
    assert list(line.x) == [count for count, _ in found.curve]
    assert fig.layout.shapes[0].x0 == 41


def test_the_csv_holds_the_heads_the_edges_and_the_curve(found):
    rows = list(csv.DictReader(io.StringIO(circuit_views.to_csv(found, 25))))
    sections = [row["section"] for row in rows]
    assert sections.count("exact") == sections.count("atp") == found.exact.size
    assert sections.count("edge") == 25 and sections.count("curve") == len(found.curve)
    first = next(row for row in rows if row["section"] == "edge")
    assert float(first["value"]) == pytest.approx(found.edges[0][2], rel=1e-4)


# --- the pairs a person types or uploads ---


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "There are no pairs"),
        (f"{TYPED}\n{CLEAN} | {CORRUPTED} | to", "Pair 2 (line 2) has 3 fields"),
        (f"{CLEAN} | | to | be", "Pair 1 (line 1) has an empty corrupted"),
        ("\n".join([TYPED] * 17), "at most 16"),
        ("x" * (circuit_pairs.MAX_BYTES + 1), "longer than this app takes"),
    ],
)
def test_typed_pairs_that_cannot_be_read_name_the_pair(text, message):
    with pytest.raises(PromptError, match=re.escape(message)):
        circuit_pairs.typed(text)


@pytest.mark.parametrize(
    ("name", "size", "seed", "message"),
    [("nope", 8, 0, "no built-in dataset"), ("ioi", 17, 0, "from 1 to 16"), ("ioi", "x", 0, "whole number")],
)
def test_a_built_in_past_the_apps_bounds_is_refused(workspace, name, size, seed, message):
    with pytest.raises(PromptError, match=message):
        circuit_pairs.built_in(name, size, seed, workspace.explorer("").tokenizer)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('clean,corrupted,answer,distractor\n"a,b\n', "has 1 fields"),  # an unclosed quote eats the rest
        ("a,b,c\n", "Pair 1 (row 1) has 3 fields"),
        ("a,b,c,d,e\n", "has 5 fields"),
        ("a\0b,c,d,e\n", None),  # a NUL is text like any other
        ("\ufeffclean,corrupted,answer,distractor\n", None),
        ("=cmd|' /C calc'!A0,b,c,d\n" * 17, "at most 16"),
    ],
)
def test_a_hostile_csv_is_refused_clearly_or_read_as_text(text, message):
    if message is None:
        try:
            circuit_pairs.from_csv(text)
        except PromptError as error:  # a clear refusal, never a crash
            assert "pair" in str(error).lower() or "CSV" in str(error)
        return
    with pytest.raises(PromptError, match=re.escape(message)):
        circuit_pairs.from_csv(text)


def test_a_csv_with_a_header_reads_as_the_typed_pairs_it_shows():
    text = f'clean,corrupted,answer,distractor\n"{CLEAN}","{CORRUPTED}", to, be\n'
    read = circuit_pairs.from_csv(text)
    assert read.args() == ([CLEAN], [CORRUPTED], [" to"], [" be"])
    assert circuit_pairs.typed(circuit_pairs.as_text(read)).args() == read.args()


def test_a_csv_saved_with_a_byte_order_mark_reads_its_header_as_a_header(tmp_path):
    """Excel's "CSV UTF-8" starts with a byte order mark, which read the header's first column as
    "\ufeffclean": the header was a pair, and refused as one."""
    path = tmp_path / "pairs.csv"
    text = f'clean,corrupted,answer,distractor\n"{CLEAN}","{CORRUPTED}", to, be\n'
    path.write_bytes(codecs.BOM_UTF8 + text.encode("utf-8"))
    assert circuit_pairs.read_csv(path).args() == ([CLEAN], [CORRUPTED], [" to"], [" be"])


def test_a_csv_file_larger_than_the_app_takes_is_refused_unread(tmp_path):
    path = tmp_path / "pairs.csv"
    path.write_bytes(b"x" * (circuit_pairs.MAX_BYTES + 1))
    with pytest.raises(PromptError, match="The CSV is larger than this app takes"):
        circuit_pairs.read_csv(path)


# --- the handlers, served ---


def test_circuit_draws_every_method_and_patch_nodes_the_node_map(client, found):
    sent = client.predict("typed", "ioi", 8, 0, TYPED, None, "logit_diff", METHODS, api_name="/circuit")
    status, nodes, position_graph, graph_heads, graph, curve, edges, influence, _typed, shown_pairs = sent
    assert influence == found.graph_influence
    assert "1 pair," in text_of(status) and f"{len(found.edges):,} edges scored" in text_of(status)
    pruned = found.graph
    assert f"pruned to {len(pruned.writers())} heads and MLPs and {len(pruned):,} of its" in text_of(status)
    drawn = next(
        trace for trace in sent_arrays(position_graph)["data"] if trace.get("meta", {}).get("role") == "nodes"
    )
    labels = set(drawn["text"])
    assert {f"{layer}.{head}" for _, layer, head, _ in pruned.writers(("head",))} <= labels
    assert "logits" in labels
    ranked = graph_views.ranked_heads(pruned)
    assert ranked and graph_heads.count('<tr class="graph-head') == len(ranked)
    layer, head, score = min(ranked, key=lambda row: row[2])
    assert (score < 0) == (f'graph-head negative" data-layer="{layer}" data-head="{head}"' in graph_heads)
    assert "The circuit on screen ran on 1 pair typed" in shown_pairs and f"<td>{CLEAN}</td>" in shown_pairs
    exact, atp = sent_arrays(nodes)["data"]
    span = found.clean - found.corrupted
    np.testing.assert_allclose(exact["z"], (found.exact - found.corrupted) / span, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(atp["z"], found.atp / span, rtol=1e-4, atol=1e-5)
    assert sent_arrays(graph)["data"] and len(sent_arrays(curve)["data"][0]["x"]) == len(found.curve)
    assert edges["value"] == circuit_views.edge_count(found, circuit_views.DEFAULT_EDGES)
    assert edges["maximum"] == len(found.edges)
    status, nodes, position_graph, graph_heads, graph, curve, *_ = client.predict(
        "typed", "ioi", 8, 0, TYPED, None, "prob", ["exact"], api_name="/patch_nodes"
    )
    assert position_graph is None and graph_heads == ""
    assert "exact node sweep" in text_of(status) and "EAP-IG" not in text_of(status)


def test_the_influence_slider_prunes_the_graph_again_from_every_edge_without_a_reading(found):
    whole = found.graph_whole
    assert len(whole) == found.graph_scored and found.graph.edges == whole.pruned(found.graph_influence).edges
    few, many = circuit_views.regraphed(found, 0.3), circuit_views.regraphed(found, 0.95)
    assert len(few.graph.writers()) <= len(many.graph.writers()) and len(few.graph) < len(many.graph)
    assert few.graph.edges == whole.pruned(node_threshold=0.3).edges and few.graph_influence == 0.3
    assert few.graph_whole is whole and circuit_views.regraphed(found, 7).graph_influence == 1.0
    graph, share = circuit_views.readable(whole)  # the default share, or less until it is readable
    assert share == NODE_THRESHOLD or len(graph.writers()) <= circuit_views.READABLE_WRITERS
    if share < NODE_THRESHOLD:
        wider = whole.pruned(round(share + circuit_views.INFLUENCE_STEP, 2))
        assert len(wider.writers()) > circuit_views.READABLE_WRITERS


def test_patch_nodes_per_position_draws_each_head_at_each_position(client, per_position):
    _status, nodes, *_ = client.predict(
        "typed", "ioi", 8, 0, TYPED, None, "logit_diff", ["exact", "atp"], "last", api_name="/patch_nodes"
    )
    exact, atp = sent_arrays(nodes)["data"]
    span = per_position.clean - per_position.corrupted
    columns = (per_position.exact.shape[0], -1)
    want = ((per_position.exact - per_position.corrupted) / span).reshape(columns)
    np.testing.assert_allclose(exact["z"], want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(atp["z"], (per_position.atp / span).reshape(columns), rtol=1e-4, atol=1e-5)


def test_a_built_in_dataset_from_its_seed_shows_the_pairs_it_made(client, workspace):
    status, *_, shown_pairs = client.predict(
        "built-in", "induction", 2, 3, "", None, "logit_diff", ["atp"], api_name="/patch_nodes"
    )
    assert "2 pairs" in text_of(status), text_of(status)
    made = circuit_pairs.built_in("induction", 2, 3, workspace.explorer("").tokenizer)
    assert "ran on 2 pairs of the built-in induction set, seed 3" in shown_pairs
    assert all(f"<td>{clean}</td>" in shown_pairs for clean in made.clean)


@pytest.mark.parametrize(
    ("source", "typed", "size", "message"),
    [
        ("typed", f"{TYPED}\n{CLEAN} | {CORRUPTED} again | to | be", 8, "In pair 2, the clean and corrupted"),
        ("typed", f"<b>{CLEAN}</b> | {CORRUPTED} | to | be", 8, "In the pair, the clean and corrupted"),
        ("typed", f"{CLEAN} | {CORRUPTED} | questionable whether | be", 8, "answer of the pair"),
        ("typed", f"{CLEAN * 12} | {CORRUPTED * 12} | to | be", 8, "up to 128"),
        ("typed", f"{CLEAN} | {CLEAN} | to | be", 8, "give the same metric"),
    ],
)
def test_a_circuit_that_cannot_be_found_says_why_and_the_app_stays_up(client, source, typed, size, message):
    status, *_ = client.predict(
        source, "ioi", size, 0, typed, None, "logit_diff", METHODS, api_name="/circuit"
    )
    assert message in text_of(status) and "<b>" not in status  # escaped
    status, *_ = client.predict("typed", "ioi", 8, 0, TYPED, None, "kl", ["exact"], api_name="/patch_nodes")
    assert "1 pair," in text_of(status)


def test_every_handler_that_computes_takes_the_request_first_and_is_costly(workspace):
    for handler in (circuit_tab.CircuitEvents.circuit, circuit_tab.CircuitEvents.patch_nodes):
        assert list(inspect.signature(handler).parameters)[1] == "request"
    demo = build_demo(workspace)
    costly = {
        f.api_name: f.concurrency_id for f in demo.fns.values() if f.api_name in ("circuit", "patch_nodes")
    }
    assert costly == {"circuit": "costly", "patch_nodes": "costly"}


def test_the_circuit_cost_grows_with_pairs_tokens_and_layers():
    config = SimpleNamespace(
        n_layers=30, n_heads=9, n_kv_heads=3, hidden_size=576, head_dim=64, intermediate_size=1536
    )
    one = limits.circuit_cost(config, 1, 16, METHODS).nbytes
    assert limits.circuit_cost(config, 8, 16, METHODS).nbytes > 4 * (one - limits.TILE_BYTES)
    assert (
        limits.circuit_cost(config, 1, 64, ["exact"]).nbytes
        < limits.circuit_cost(config, 1, 64, METHODS).nbytes
    )
    assert "8 pairs of up to 16 tokens" in limits.circuit_cost(config, 8, 16, METHODS).what
    at_positions = limits.circuit_cost(config, 8, 16, ["exact"], (-4, -3, -2, -1))
    assert "each head at 4 positions" in at_positions.what
    assert at_positions.nbytes > limits.circuit_cost(config, 8, 16, ["exact"]).nbytes
    # the methods run one after another: the reading holds the most any one of them does
    held = limits.circuit_memory(config, 8, 16, METHODS)
    assert limits.circuit_cost(config, 8, 16, METHODS).nbytes == max(held.values()) + limits.TILE_BYTES


SMOLLM2 = SimpleNamespace(
    n_layers=30, n_heads=9, n_kv_heads=3, hidden_size=576, head_dim=64, intermediate_size=1536
)
IOI_8 = [(4, 14, 9), (2, 18, 13), (2, 15, 10)]  # the built-in IOI's 8 pairs, seed 0: (pairs, tokens, first)


def test_a_circuit_past_the_request_bound_is_refused_before_it_starts_saying_what_fits():
    names = circuit_views.METHOD_NAMES
    work = limits.circuit_forwards(SMOLLM2, IOI_8, METHODS)
    forward = 0.25  # s, one SmolLM2 forward of 18 tokens on a slow or busy server's 2 threads
    total = sum(work.values()) * forward
    assert total > 60  # every method on 8 pairs passes a Space's bound there
    message = limits.too_long(work, total, 8, 60, names, False)
    fits = int(re.search(r"at most (\d+) pairs", message)[1])
    assert 1 <= fits < 8 and "untick exact node sweep" in message and "past its 60 s bound" in message
    smaller = [(min(size, fits), n, first) for size, n, first in IOI_8[:1]]  # that many pairs fit
    assert sum(limits.circuit_forwards(SMOLLM2, smaller, METHODS).values()) * forward <= 60
    # each head at each position from the first difference costs more than at every position at once
    at_each = limits.circuit_forwards(SMOLLM2, IOI_8, ["exact"], tuple(range(-8, 0)))
    assert at_each["exact"] > limits.circuit_forwards(SMOLLM2, IOI_8, ["exact"])["exact"]
    assert "fewer positions" in limits.too_long(at_each, 100, 8, 60, names, True)


def test_a_bounded_server_refuses_a_circuit_it_cannot_finish_in_time(workspace):
    events = circuit_tab.CircuitEvents.__new__(circuit_tab.CircuitEvents)
    events.workspace = SimpleNamespace(
        policy=SimpleNamespace(request_seconds=1e-4), explorer=lambda model, load: workspace.explorer("")
    )
    with pytest.raises(
        LimitError, match=r"This circuit would take about .* bound on a request: (ask for|untick)"
    ):
        events.circuit(None, "typed", "ioi", 8, 0, TYPED, None, "logit_diff", METHODS, "heads", "")
    events.workspace.policy.request_seconds = 0  # unbounded: no estimate, no refusal
    limits.circuit_time(
        workspace.explorer(""),
        pairs.dataset(workspace.explorer(""), *circuit_pairs.typed(TYPED).args()),
        METHODS,
        None,
        0,
        {},
    )


def test_a_link_carries_the_circuits_settings_and_restores_them(workspace):
    linked = circuit_tab.settings("built-in", "factual", 5, 7, "", "prob", ["exact", "eap"])
    query = share.query_string(share.ViewState(prompt="x", tab="circuit", circuit=linked))
    assert "tab=circuit" in query and "circuit=factual" in query
    assert "circuit=" not in share.query_string(share.ViewState(prompt="x", tab="lens", circuit=linked))
    with gr.Blocks():
        tab = circuit_tab.build(workspace)
    events = circuit_tab.CircuitEvents(tab, SimpleNamespace(workspace=None))  # restoring reads neither

    def restored(link: str) -> dict:
        return events.restore(SimpleNamespace(query_params=dict(parse_qsl(link.lstrip("?")))))

    found = restored(query)
    assert [found[box] for box in (tab.source, tab.name, tab.size, tab.seed)] == ["built-in", "factual", 5, 7]
    assert (found[tab.metric], found[tab.methods]) == ("prob", ["exact", "eap"]) and tab.typed not in found
    linked = circuit_tab.settings("built-in", "ioi", 5, 7, "", "prob", ["exact"], "differ")
    assert restored(linked)[tab.positions] == "differ"
    found = restored(circuit_tab.settings("typed", "ioi", 8, 0, TYPED, "logit_diff", ["exact"]))
    assert found[tab.source] == "typed" and found[tab.typed] == TYPED and tab.name not in found

"""A page's results (a circuit, a patching sweep) kept in the workspace's budget, not in session state
that no budget counts: counted at their size, one of each kind a session, dropped like runs when room is
needed, the page told when one it shows is gone; the page's key expires for a client that never opens
the heartbeat, and a closed page's results go at once."""

from __future__ import annotations

import time
import tracemalloc
import types
from pathlib import Path

import httpx
import numpy as np
import pytest
from gradio_client import Client

from explorer.app import examples, session_results
from explorer.app.policy import Policy
from explorer.app.session_results import ResultKey
from explorer.app.ui import circuit as circuit_tab
from explorer.app.ui import patching, sessions
from explorer.app.ui.circuit_downloads import CircuitDownloads
from explorer.app.workspace import Workspace
from explorer.views import sweep_export
from tests.conftest import served

UNLIMITED_LOADS = dict(loads_per_minute=10_000, server_loads_per_minute=10_000)
MIB = 1 << 20
EXAMPLE = examples.PATCHING_EXAMPLES["induction (bundled model)"]


@pytest.fixture
def workspace():
    workspace = Workspace(device="cpu", policy=Policy(**UNLIMITED_LOADS))  # the bundled model
    workspace.explorer("")
    return workspace


def array_of(nbytes: int) -> np.ndarray:
    return np.zeros(nbytes // 4, np.float32)


def test_a_pages_result_is_counted_in_the_budget_and_a_session_keeps_one_of_each_kind(workspace):
    before = workspace.nbytes()
    first = session_results.keep(workspace, "a page", "circuit", array_of(4 * MIB))
    assert workspace.nbytes() - before >= 4 * MIB
    second = session_results.keep(workspace, "a page", "circuit", array_of(4 * MIB))
    sweep = session_results.keep(workspace, "a page", "sweep", array_of(MIB))
    theirs = session_results.keep(workspace, "another page", "circuit", array_of(MIB))
    assert session_results.result(workspace, first) is None  # replaced by the page's next circuit
    assert all(session_results.result(workspace, key) is not None for key in (second, sweep, theirs))
    assert 6 * MIB <= workspace.nbytes() - before < 6.1 * MIB
    session_results.end_session(workspace, "a page")
    assert [session_results.result(workspace, key) is None for key in (second, sweep, theirs)] == [
        True,
        True,
        False,
    ]


def test_results_make_room_least_recently_used_first_as_runs_do(workspace):
    workspace.max_bytes = workspace.nbytes() + 10 * MIB  # the model and 10 MiB more
    old = session_results.keep(workspace, "a page", "circuit", array_of(4 * MIB))
    recent = session_results.keep(workspace, "another page", "circuit", array_of(4 * MIB))
    session_results.result(workspace, old)  # looked at again: now the most recently used result
    workspace.explorer("")  # and the model after it
    with workspace.reserve(4 * MIB, "a reading"):
        assert workspace.nbytes() <= workspace.max_bytes
    assert session_results.result(workspace, old) is not None
    assert session_results.result(workspace, recent) is None


def test_a_results_size_is_what_building_it_allocated():
    """Measured against Python's own count of what was allocated (tracemalloc), never against itself:
    a circuit's ~70,000 edges of shared node tuples, its arrays and a view of one."""
    ups = [("head", layer, head) for layer in range(30) for head in range(9)] + [
        ("mlp", n) for n in range(30)
    ]
    downs = [("q", layer, head) for layer in range(30) for head in range(9)] + [("mlp", n) for n in range(30)]
    rng = np.random.default_rng(0)
    tracemalloc.start()
    circuit = {
        "exact": rng.random((30, 9, 2048)),  # [L, H, P]: as much as the edges
        "top": rng.random((30, 9, 2048))[:, :, :8],  # a view, holding the whole
        "edges": [(ups[a], downs[b], float(s) / 300) for a, b, s in rng.integers(0, 300, (70_000, 3))],
    }
    allocated, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert 0.9 * allocated <= session_results.held_bytes(circuit) <= 1.1 * allocated


def events_of(workspace, tab_events, section):
    events = tab_events.__new__(tab_events)
    events.workspace, events.section, events.tab = workspace, section, section
    events.shared = types.SimpleNamespace(workspace=workspace)
    return events


def test_a_result_the_page_shows_and_the_server_dropped_is_said_so(workspace):
    gone = ResultKey("a page", "circuit", -1)  # kept once, dropped since
    circuit = events_of(workspace, circuit_tab.CircuitEvents, None)
    with pytest.raises(
        ValueError, match=r"^The circuit on screen is no longer kept: .*Find the circuit again"
    ):
        circuit.show_edges(gone, "circuit=ioi", 10)
    with pytest.raises(ValueError, match="no longer kept"):  # its key expired: the page still shows it
        CircuitDownloads(circuit).export(None, None, "circuit=ioi")
    assert circuit.show_edges(None, "", 10) == {}  # none found yet: the slider moves, nothing to say
    sweeps = events_of(workspace, patching.PatchingEvents, types.SimpleNamespace(download="download"))
    export = sweeps.exporter(sweep_export.write_sweep_csv)
    with pytest.raises(ValueError, match=r"^The sweep on screen is no longer kept: .*Patch every head again"):
        export(None, ResultKey("a page", "sweep", -1), ("", EXAMPLE.clean))
    with pytest.raises(ValueError, match="Patch every head first"):
        export(None, None, None)


def keys_kept(monkeypatch) -> list[ResultKey]:
    """The keys the app hands its pages, as it keeps their results."""
    kept, keep = [], session_results.keep
    monkeypatch.setattr(session_results, "keep", lambda *args: kept.append(keep(*args)) or kept[-1])
    return kept


def patched(url: str, **options) -> Client:
    client = Client(url, verbose=False, **options)
    client.predict(
        EXAMPLE.clean, EXAMPLE.corrupted, EXAMPLE.answer, EXAMPLE.distractor, "", api_name="/patch"
    )
    return client


def wait_for(condition, seconds: float = 30) -> bool:
    """Whether `condition()` held within `seconds` (how long the test waits, not how fast the app is)."""
    end = time.monotonic() + seconds
    while not condition() and time.monotonic() < end:
        time.sleep(0.1)
    return condition()


def test_a_result_goes_when_its_key_expires_for_a_client_that_never_heartbeats(workspace, monkeypatch):
    """An API client that never opens the heartbeat is never seen to leave: its session state lasted
    until Gradio's cap of 10,000 sessions. The key's state expires, and its result goes with it."""
    monkeypatch.setattr(sessions, "RESULT_SECONDS", 1)
    monkeypatch.setattr(Client, "_stream_heartbeat", staticmethod(lambda *args: None))
    kept = keys_kept(monkeypatch)
    with served(workspace) as url:
        patched(url)
        assert len(kept) == 1 and session_results.result(workspace, kept[0]) is not None
        assert wait_for(lambda: session_results.result(workspace, kept[0]) is None)


def test_a_closed_pages_results_go_at_once(workspace, monkeypatch):
    monkeypatch.setenv("GRADIO_HEARTBEAT_INTERVAL", "0.2")  # a closed client's heartbeat ends soon after
    kept = keys_kept(monkeypatch)
    with served(workspace) as url:
        leaving, staying = patched(url), patched(url)
        leaving.close()
        assert wait_for(lambda: session_results.result(workspace, kept[0]) is None)
        assert session_results.result(workspace, kept[1]) is not None
        staying.close()


def test_the_pages_config_shares_the_workspace_and_its_models_rather_than_copying_them(
    workspace, monkeypatch
):
    """Gradio deep-copies the page's components as it sends their config (each page load, each API
    client). A result's expiry callback reached the workspace, so each copied every model and run the
    server held: seconds of the server's event loop per visitor once SmolLM2 was loaded."""
    copies = []

    def copied(self, memo):
        copies.append(self)
        return self

    monkeypatch.setattr(Workspace, "__deepcopy__", copied, raising=False)
    with served(workspace) as url:
        assert httpx.get(f"{url.rstrip('/')}/config", timeout=30).status_code == 200
    assert copies == []


def test_the_graph_per_position_on_screen_downloads_as_the_json_graph_from_json_reads(workspace, tmp_path):
    """ "The graph per position (.json)": the kept circuit's pruned graph, written to the visitor's
    download file; a circuit found without the graph says what to tick; the graph kept is counted with
    what its figure cached (its edges) once drawn."""
    import explorer
    from explorer.app.downloads import Downloads
    from explorer.engine import pairs, prompt_sets
    from explorer.views import circuits as circuit_views

    ex = workspace.explorer("")
    chosen = prompt_sets.PromptSet(
        "typed",
        ["To be, or not to be, that is the question: whether the"],
        ["To be, or not or be, that is the question: whether the"],
        [" to"],
        [" be"],
    )
    data = pairs.dataset(ex, *chosen.args())
    request = types.SimpleNamespace(
        session_hash="a page", client=types.SimpleNamespace(host="10.0.0.1"), headers={}
    )
    circuit = events_of(workspace, circuit_tab.CircuitEvents, types.SimpleNamespace(download="download"))
    circuit.shared.downloads = Downloads(tmp_path, per_visitor=1 << 24, total=1 << 26)
    found = circuit_views.find(ex, data, ["graph"], listed=pairs.listed_pairs(*chosen.args()))
    before = session_results.held_bytes(found)
    circuit_views.position_graph(found)  # drawn: the graph's edges cached
    assert session_results.held_bytes(found) > before
    key = sessions.keep(workspace, request, "circuit", circuit_tab.Shown(found, "", chosen, "circuit=typed"))
    written = CircuitDownloads(circuit).export_graph(request, key, "circuit=typed")["download"]
    graph = explorer.Graph.from_json(Path(written).read_text(encoding="utf-8"))
    assert graph.edges == found.graph.edges and graph.pairs[0]["clean"] == chosen.clean[0]
    plain = circuit_views.find(ex, data, ["eap"])
    key = sessions.keep(workspace, request, "circuit", circuit_tab.Shown(plain, "", chosen, "circuit=typed"))
    with pytest.raises(ValueError, match="with “graph per position” ticked"):
        CircuitDownloads(circuit).export_graph(request, key, "circuit=typed")

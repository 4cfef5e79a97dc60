"""Fair shares of the queue: one visitor (an address, or one session) holds a few places, waiting or running,
and two of one function however many events call it, so that a client joining from many sessions of one
address, or through many events, cannot shut every other visitor out; places come back as events
complete, and when a page's stream closes; a place and its event live and die together."""

from __future__ import annotations

import itertools
import threading
import time
import uuid

import pytest
from gradio_client import Client

from explorer.app import fair_queue, queue_middleware
from explorer.app.fair_queue import UNHEARD_SECONDS, Place, QueueShares
from explorer.app.policy import Policy
from explorer.app.visitors import PRIVATE_NETWORKS, Proxies, Visitor
from explorer.app.workspace import Workspace
from explorer.tools.stress_client import App, status_of
from tests.conftest import free_port, served

UNLIMITED_LOADS = dict(loads_per_minute=10_000, server_loads_per_minute=10_000)


# --- the shares' bookkeeping ---


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def admitted(shares: QueueShares, visitor: Visitor, event: str = "run") -> bool:
    return isinstance(shares.admit(visitor, event), Place)


def test_an_address_holds_its_places_across_sessions_and_a_session_across_addresses():
    shares = QueueShares(per_visitor=2)
    assert admitted(shares, Visitor("10.0.0.1", "s1"), "run")
    assert admitted(shares, Visitor("10.0.0.1", "s2"), "layer")  # two sessions of one address: its two
    refused = shares.admit(Visitor("10.0.0.1", "s3"), "lens")  # a third session: no new allowance
    assert "at most 2 requests at a time from one visitor (EXPLORER_QUEUE_PER_VISITOR)" in refused
    assert admitted(shares, Visitor("10.0.0.2", "t1"))  # another address
    forged = [Visitor(f"10.1.0.{i}", "one-session") for i in range(3)]  # one session, forged addresses
    assert [admitted(shares, v, str(i)) for i, v in enumerate(forged)] == [True, True, False]


def test_an_address_holds_two_places_of_one_event_so_two_runs_at_most_wait_ahead_of_others():
    shares = QueueShares(per_visitor=8)
    sessions = (Visitor("10.0.0.1", f"s{i}") for i in range(3))
    assert [admitted(shares, visitor, "run") for visitor in sessions] == [True, True, False]
    assert "at most 2 of one kind of request" in shares.admit(Visitor("10.0.0.1", "s9"), "run")
    assert admitted(shares, Visitor("10.0.0.1", "s9"), "layer")
    assert admitted(shares, Visitor("10.0.0.2", "t"), "run")


def test_a_place_comes_back_when_its_event_completes_or_the_queue_refused_it():
    shares = QueueShares(per_visitor=1)
    visitor = Visitor("10.0.0.1", "s")
    place = shares.admit(visitor)
    shares.joined(place, "event-1")
    assert not admitted(shares, visitor)
    shares.finished("event-1")
    refused = shares.admit(visitor)
    shares.joined(refused, None)  # the queue said no (full): the place goes with it
    assert admitted(shares, visitor)


def test_when_a_page_or_an_events_stream_closes_its_places_go():
    shares = QueueShares(per_visitor=3)
    page, other = Visitor("10.0.0.1", "page"), Visitor("10.0.0.1", "other")
    for visitor, event in ((page, "a"), (page, "b"), (other, "c")):
        shares.joined(shares.admit(visitor, event), event)
    shares.closed(session="page")
    assert shares.held(page) == 1  # the other session's event
    shares.closed(event_id="c")
    assert shares.held(page) == 0


def test_a_join_answered_while_its_pages_stream_is_shut_is_kept_while_the_stream_opens_again():
    """The page shuts its stream whenever none of its events is pending, as when one event's end
    starts the next (`.then`): that join is answered with no stream open, and the page opens one to
    read it. Its event is never cancelled for that; a stream that stays shut past UNHEARD_SECONDS
    (the page closed) gives the place and its event up."""
    clock = Clock()
    shares = QueueShares(per_visitor=8, clock=clock)
    page = Visitor("10.0.0.1", "page")
    shares.streaming("page")
    place = shares.admit(page, "neighbours")  # joined as the event before it completed
    shares.closed(session="page")  # the page shuts its stream: nothing of its was pending
    shares.joined(place, "chained")
    clock.now += 1.0
    shares.streaming("page")  # and opens it again to read the chained event
    clock.now += UNHEARD_SECONDS
    assert shares.take_dropped() == [] and shares.held(page) == 1
    shares.finished("chained")
    assert shares.held(page) == 0
    closed = shares.admit(page, "neighbours")  # the page closed for good as this join was answered
    shares.closed(session="page")
    shares.joined(closed, "never-read")
    assert shares.take_dropped() == [] and shares.held(page) == 1
    clock.now += UNHEARD_SECONDS + 1.0
    assert [p.event_id for p in shares.take_dropped()] == ["never-read"] and shares.held(page) == 0


def test_a_pages_place_whose_stream_does_not_open_soon_after_its_join_goes():
    """A page closed as it joined never opens the stream that reads its event: its place goes after
    UNHEARD_SECONDS; one whose page opens its stream, at once or later, stays until its event ends."""
    clock = Clock()
    shares = QueueShares(per_visitor=1, clock=clock)
    closed, kept = Visitor("10.0.0.1", "closed"), Visitor("10.0.0.2", "kept")
    shares.joined(shares.admit(closed), "never-read")
    shares.joined(shares.admit(kept), "read-later")
    clock.now = 1.0
    shares.streaming("kept")
    clock.now = UNHEARD_SECONDS + 1.0
    assert admitted(shares, closed) and not admitted(shares, kept)


def test_a_place_whose_event_never_ends_is_given_back_after_a_while():
    clock = Clock()
    shares = QueueShares(per_visitor=1, stale=900.0, clock=clock)
    visitor = Visitor("10.0.0.1", "listening")
    shares.joined(shares.admit(visitor), "never-ends")
    shares.streaming("listening")
    clock.now = 899.0
    assert not admitted(shares, visitor)
    clock.now = 901.0
    assert admitted(shares, visitor)
    assert [p.event_id for p in shares.take_dropped()] == ["never-ends"]


def test_places_that_go_while_their_events_may_run_hand_those_events_over_once_to_be_cancelled():
    """Two fresh sessions every 31 s grew the queue 4 → 16: each place went after 30 s unheard while
    Gradio kept its event. Whatever ends a place before its event ends (unheard, past its time) now
    gives the event to be cancelled, and only then."""
    clock = Clock()
    shares = QueueShares(per_visitor=8, clock=clock)
    silent, rest, listening = Visitor("10.0.0.1", "silent"), Visitor("10.0.0.2"), Visitor("10.0.0.3", "page")
    shares.joined(shares.admit(silent, "run", 53), "silent-run")
    shares.joined(shares.admit(rest, "run", 53), "rest-run")  # a REST call, its event's stream opened
    shares.streaming(event_id="rest-run")
    shares.streaming("page")
    shares.joined(shares.admit(listening, "run", 53), "read-run")
    finished = shares.admit(listening, "layer", 7)
    shares.joined(finished, "layer-done")
    shares.finished("layer-done")
    assert shares.take_dropped() == []
    clock.now = UNHEARD_SECONDS + 1.0
    dropped = shares.take_dropped()
    assert [(p.event_id, p.function, p.visitor.session) for p in dropped] == [("silent-run", 53, "silent")]
    assert shares.take_dropped() == []
    assert shares.held(rest) == 1 and shares.held(listening) == 1
    shares.closed(session="page")  # the page closed; a join of its answered after: unheard, it goes in time
    late = shares.admit(listening, "run", 53)
    shares.joined(late, "late-run")
    clock.now += UNHEARD_SECONDS + 1.0
    assert [p.event_id for p in shares.take_dropped()] == ["late-run"]
    refused = shares.admit(listening, "run", 53)
    shares.joined(refused, None)  # refused by the queue: no event to cancel
    assert shares.take_dropped() == []


# --- served ---


@pytest.fixture
def slow_runs(monkeypatch):
    """Prompts starting 'slow' take two seconds more to run: events that hold their places a while."""
    real = Workspace.cached_run

    def cached_run(self, model, text, ablation=None):
        if isinstance(text, str) and text.startswith("slow"):
            time.sleep(2.0)
        return real(self, model, text, ablation)

    monkeypatch.setattr(Workspace, "cached_run", cached_run)


def test_one_address_joining_from_64_sessions_leaves_room_for_a_visitor_from_another(
    gqa_checkpoint, slow_runs
):
    """64 joins from new sessions of one address were all admitted; every other visitor was then told
    'Queue is full' while they waited. Two get places (of one event: the runs ahead of the visitor's);
    the rest are refused at once, saying why."""
    policy = Policy(queue_size=64, queue_per_visitor=3, **UNLIMITED_LOADS)
    with served(Workspace(gqa_checkpoint, device="cpu", policy=policy)) as url:
        attacker = App(url, timeout=30, address="127.0.0.2")
        answers = [
            attacker.http.post(
                f"{attacker.url}/gradio_api/call/run",
                json={"data": [f"slow {i}", 0, 0], "session_hash": uuid.uuid4().hex},
            )
            for i in range(64)
        ]
        assert [a.status_code for a in answers].count(200) == 2
        refused = [a for a in answers if a.status_code == 429]
        assert len(refused) == 62
        assert "at most 2 of one kind of request at a time from one visitor" in refused[0].json()["detail"]
        visitor = App(url, timeout=30, address="127.0.0.3")
        ok, outputs = visitor.call("run", ["To be, or not to be", 0, 0], session="elsewhere")
        assert ok and "one fast forward" in status_of(outputs), outputs


def test_a_session_asking_one_thing_after_another_never_meets_its_limit(gqa_checkpoint):
    """Places come back as events complete, over the REST API's streams and the page's (gradio_client)."""
    policy = Policy(queue_per_visitor=1, **UNLIMITED_LOADS)
    with served(Workspace(gqa_checkpoint, device="cpu", policy=policy)) as url:
        app = App(url, timeout=60)
        for layer in itertools.islice(itertools.cycle(range(4)), 6):
            ok, outputs = app.call("run", [f"To be, or not to be {layer}", layer, 0], session="steady")
            assert ok, outputs
        client = Client(url, verbose=False)
        for text in ("Now is the winter", "of our discontent", "made glorious summer"):
            assert "one fast forward" in status_of(list(client.predict(text, 0, 0, api_name="/run")))


def launched(workspace):
    """The app over `workspace`, launched: its demo (for its functions) and an App to call it."""
    from explorer.app.ui import build_demo

    demo = build_demo(workspace)
    demo.launch(server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True)
    return demo


def join(app: App, fn_index: int, data: list, session: str, headers: dict | None = None) -> int:
    """A page's raw join of one event (its stream never read): the HTTP status it was answered with."""
    body = {"data": data, "fn_index": fn_index, "session_hash": session, "event_data": None}
    return app.http.post(f"{app.url}/gradio_api/queue/join", json=body, headers=headers or {}).status_code


def test_one_visitor_calling_a_handler_through_its_many_events_holds_two_places_of_it(gqa_checkpoint):
    """The run is wired under ten events of one concurrency id; counted by event, one visitor joined
    eight 2,048-token runs under four of them. Counted by the function, two."""
    demo = launched(Workspace(gqa_checkpoint, device="cpu", policy=Policy(**UNLIMITED_LOADS)))
    try:
        functions = demo.functions()
        runs = sorted({f.index for f in functions.values() if f.kind == functions["run"].kind})
        assert len(runs) >= 4
        attacker = App(demo.local_url, timeout=30, address="127.0.0.2")
        statuses = [join(attacker, i, [None] * len(demo.fns[i].inputs), uuid.uuid4().hex) for i in runs[:4]]
        assert statuses == [200, 200, 429, 429]
        other = App(demo.local_url, timeout=30, address="127.0.0.3")
        assert join(other, runs[2], [None] * len(demo.fns[runs[2]].inputs), "elsewhere") == 200
    finally:
        demo.close()


def test_a_join_whose_stream_never_opens_loses_its_place_and_its_event_together(gqa_checkpoint, monkeypatch):
    """A place that went unheard used to leave its event in Gradio's queue, computed for nobody, and
    sessions joining every 31 s grew the queue without bound. The event is now cancelled with it."""
    monkeypatch.setattr(fair_queue, "UNHEARD_SECONDS", 1.0)
    monkeypatch.setattr(queue_middleware, "SWEEP_SECONDS", 0.2)
    ran, real = [], Workspace.cached_run

    def cached_run(self, model, text, ablation=None):
        ran.append(text)
        if text.startswith("slow"):
            time.sleep(3.0)
        return real(self, model, text, ablation)

    monkeypatch.setattr(Workspace, "cached_run", cached_run)
    with served(Workspace(gqa_checkpoint, device="cpu", policy=Policy(**UNLIMITED_LOADS))) as url:
        first = App(url, timeout=60, address="127.0.0.2")
        answered = []
        running = threading.Thread(
            target=lambda: answered.append(first.call("run", ["slow run", 0, 0], session="reads")[0])
        )
        running.start()
        while not ran:
            time.sleep(0.05)
        silent = App(url, timeout=60, address="127.0.0.3")
        for session in ("silent-1", "silent-2"):  # queued behind the slow run, which holds the concurrency
            body = {"data": ["never read", 0, 0], "session_hash": session}
            assert silent.http.post(f"{silent.url}/gradio_api/call/run", json=body).status_code == 200
        running.join()
        time.sleep(1.5)  # were their events still queued, they would have started by now
        assert answered == [True] and ran == ["slow run"], ran
        ok, outputs = silent.call("run", ["To be, or not to be", 0, 0], session="fresh")
        assert ok and "one fast forward" in status_of(outputs)  # past two of one kind, were they held


def test_addresses_a_client_forwards_do_not_make_it_another_visitor(gqa_checkpoint):
    """Behind a trusted proxy, 50 forged first entries of X-Forwarded-For were 50 visitors, each with
    its own places. The address is the entry the proxy appended (here the test speaks as the proxy)."""
    policy = Policy(queue_per_visitor=2, proxies=Proxies(trusted=PRIVATE_NETWORKS), **UNLIMITED_LOADS)
    demo = launched(Workspace(gqa_checkpoint, device="cpu", policy=policy))
    try:
        functions = demo.functions()
        lens, flow = functions["lens"].index, functions["layer"].index
        client = App(demo.local_url, timeout=30, address="127.0.0.2")
        statuses = [
            join(client, index, [None] * len(demo.fns[index].inputs), uuid.uuid4().hex, forged)
            for index, forged in [
                (lens, {"x-forwarded-for": f"198.51.100.{i}, 203.0.113.7"}) for i in range(2)
            ]
            + [(flow, {"x-forwarded-for": "198.51.100.9, 203.0.113.7"})]
        ]
        assert statuses == [200, 200, 429]
        another = {"x-forwarded-for": "198.51.100.9, 203.0.113.8"}
        assert join(client, flow, [None] * len(demo.fns[flow].inputs), "another", another) == 200
    finally:
        demo.close()

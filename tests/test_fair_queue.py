"""Fair shares of the queue: one visitor (an address, or one session) holds a few places, waiting or running,
so that a client joining from many sessions of one address cannot shut every other visitor out; places
come back as events complete, and when a page's stream closes."""

from __future__ import annotations

import itertools
import time
import uuid

import pytest
from gradio_client import Client

from explorer.app.fair_queue import UNHEARD_SECONDS, Place, QueueShares
from explorer.app.policy import Policy
from explorer.app.visitors import Visitor
from explorer.app.workspace import Workspace
from explorer.tools.stress_client import App, status_of
from tests.conftest import served

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


def test_a_join_answered_after_its_pages_stream_ended_gives_its_place_back():
    """A page closed while a join of its was being answered: no stream will say when that event
    ends, so its place goes at once instead of after `stale` seconds; while another stream of the
    session is open, or one opened since, the place is kept until its event completes."""
    clock = Clock()
    shares = QueueShares(per_visitor=8, clock=clock)
    page = Visitor("10.0.0.1", "page")
    shares.streaming("page")
    for round in range(3):  # past PER_EVENT: none of them kept
        clock.now += 1.0
        place = shares.admit(page, "neighbours")
        assert isinstance(place, Place), round
        shares.closed(session="page")  # the page closed; its join is answered after
        shares.joined(place, f"late-{round}")
        assert shares.held(page) == 0
        shares.streaming("page")
    clock.now += 1.0
    shares.streaming("page")  # two streams of one session, one ends: the other reads the event
    place = shares.admit(page, "neighbours")
    shares.closed(session="page")
    shares.joined(place, "read")
    assert shares.held(page) == 1
    shares.finished("read")
    shares.closed(session="page")  # the page's last stream ends (nothing to read)
    clock.now += 1.0
    place = shares.admit(page, "neighbours")  # the stream ended before this join: it is opened after
    shares.joined(place, "next")
    assert shares.held(page) == 1


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


def test_a_place_whose_stream_never_opened_is_given_back_after_a_while():
    clock = Clock()
    shares = QueueShares(per_visitor=1, stale=900.0, clock=clock)
    visitor = Visitor("10.0.0.1", "silent")
    shares.joined(shares.admit(visitor), "never-read")
    assert not admitted(shares, visitor)
    clock.now = 901.0
    assert admitted(shares, visitor)


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

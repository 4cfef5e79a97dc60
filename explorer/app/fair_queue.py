"""Fair shares of Gradio's queue: one visitor (an address, or one session of it) holds at most
`Policy.queue_per_visitor` places in it, waiting or running, and at most PER_KIND of one function (a
run, a layer switch: as the page's own "always last" switches, one computing and one waiting), counted
by the function's concurrency id, so a handler wired under many events is one kind however it is
called; a join past that is answered at once (HTTP 429) with a message saying so, and never enters the
queue. So one client joining from many sessions of one address, or through many events, cannot fill
the queue, nor line up more than two long runs ahead of a visitor from elsewhere, who always finds room.

`QueueShares` keeps the count; `explorer.app.queue_middleware.FairQueue` tells it of each join and
stream from Gradio's public protocol. A place goes:

- when its event completes (its stream says so), or the queue refuses its join;
- when its stream ends (the page closed): Gradio drops the events a closed stream leaves, and the
  place of one still running goes too, which its time bound ends (`Policy.request_seconds`) and which
  the readings' own rule keeps the visitor from doubling (`explorer.app.limits.Readings`);
- with its event, which the middleware cancels, when nothing would ever read that event: its stream
  not opened within UNHEARD_SECONDS of its join (a page closed as it joined, a client that joins and
  never listens), or a place past `stale` seconds. A place and its event live and die together, so
  the queue computes nothing that no place counts. A join answered while its session has no stream
  open is not taken for a closed page: the page closes its stream whenever none of its events is
  pending, as when one event's end starts the next (`.then`), and opens it again once the join is
  answered; only a stream that stays shut says nobody reads the event.

The trivial events of the page (a tab's name kept, a flag set) skip the queue (`queue=False`): a click
on a tab would otherwise take four places at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from explorer.app.visitors import Visitor

STALE_SECONDS = 900.0  # a place whose event has not completed by then is given back, its event cancelled
PER_KIND = 2  # places one visitor holds of one function (its concurrency id)
UNHEARD_SECONDS = 30.0  # a place whose event's stream has not opened this long after its join goes


@dataclass(frozen=True)
class Function:
    """One of the app's queued functions as a join names it (its index, or its API name)."""

    index: int  # what Gradio's `…/cancel` takes (-1: not known)
    kind: str  # its concurrency id: every event that runs it counts as one kind


@dataclass(eq=False)
class Place:
    """One event's place in the queue, from its join until it completes."""

    visitor: Visitor
    kind: str  # which of the app's functions (its concurrency id)
    since: float
    function: int = -1  # its index, for cancelling its event
    event_id: str = ""  # '' while the join is being answered
    heard: bool = False  # a stream that reads its event open since its join


@dataclass
class QueueShares:
    """How many places each visitor holds, by address and by session, and their giving back. Places
    that go while their events may still be queued or computing are kept in `dropped` until the
    middleware has cancelled those events (`take_dropped`)."""

    per_visitor: int
    stale: float = STALE_SECONDS
    clock: Callable[[], float] = time.monotonic
    _places: list[Place] = field(default_factory=list)
    _dropped: list[Place] = field(default_factory=list)
    _streams: dict[str, int] = field(default_factory=dict)  # session -> its streams open now
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def admit(self, visitor: Visitor, kind: str = "", function: int = -1) -> Place | str:
        """A place for the visitor's next call of `kind`, or why there is none: its address or its
        session holds all of its places, or its address PER_KIND of that kind's."""
        with self._lock:
            self._expire()
            by_address = [p for p in self._places if p.visitor.address == visitor.address]
            by_session = visitor.session and sum(p.visitor.session == visitor.session for p in self._places)
            if max(len(by_address), by_session or 0) >= self.per_visitor:
                return (
                    f"This app holds at most {self.per_visitor} requests at a time from one visitor "
                    "(EXPLORER_QUEUE_PER_VISITOR), and yours are all waiting or running: try again in a "
                    "few seconds, once one of them has finished."
                )
            if sum(p.kind == kind for p in by_address) >= PER_KIND:
                return (
                    f"This app holds at most {PER_KIND} of one kind of request at a time from one "
                    "visitor, and two of yours are waiting or running: try again once one has finished."
                )
            place = Place(visitor, kind, self.clock(), function)
            self._places.append(place)
            return place

    def joined(self, place: Place, event_id: str | None) -> None:
        """The queue answered the join: with the event's id, heard at once if its session's stream is
        open (else once one opens, or it goes after UNHEARD_SECONDS), or refused it (None: the place
        goes)."""
        with self._lock:
            if event_id:
                place.event_id = event_id
                place.heard = place.heard or bool(self._streams.get(place.visitor.session))
            elif place in self._places:
                self._places.remove(place)

    def streaming(self, session: str = "", event_id: str = "") -> None:
        """A stream opened: the session's, which reads each of its events, or one event's."""
        with self._lock:
            if session:
                self._streams[session] = self._streams.get(session, 0) + 1
            for place in self._places:
                if (session and place.visitor.session == session) or (
                    event_id and place.event_id == event_id
                ):
                    place.heard = True

    def finished(self, event_id: str) -> None:
        with self._lock:
            self._places = [p for p in self._places if p.event_id != event_id]

    def closed(self, session: str = "", event_id: str = "") -> None:
        """A stream ended (the session's, or one event's): its events' places go (Gradio drops the
        events a closed stream leaves)."""
        with self._lock:
            if session:
                open_now = self._streams.pop(session, 1) - 1
                if open_now > 0:
                    self._streams[session] = open_now
            self._places = [
                p
                for p in self._places
                if not (p.event_id and (p.event_id == event_id or (session and p.visitor.session == session)))
            ]

    def held(self, visitor: Visitor) -> int:
        with self._lock:
            self._expire()
            return sum(p.visitor.address == visitor.address for p in self._places)

    def take_dropped(self) -> list[Place]:
        """Places gone (past their time, or unheard) whose events are to be cancelled; each once."""
        with self._lock:
            self._expire()
            dropped, self._dropped = self._dropped, []
            return dropped

    def _expire(self) -> None:
        now = self.clock()
        gone = lambda p: now - p.since >= self.stale or (not p.heard and now - p.since >= UNHEARD_SECONDS)  # noqa: E731
        self._dropped += [p for p in self._places if gone(p) and p.event_id]
        self._places = [p for p in self._places if not gone(p)]

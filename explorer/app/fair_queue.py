"""Fair shares of Gradio's queue: one visitor (an address, or one session of it) holds at most
`Policy.queue_per_visitor` places in it, waiting or running, and at most PER_EVENT of one event (a
Run, a layer switch: as the page's own "always last" switches, one computing and one waiting); a join
past that is answered at once (HTTP 429) with a message saying so, and never enters the queue. So one
client joining from many sessions of one address cannot fill the queue, nor line up more than two
long runs ahead of a visitor from elsewhere, who always finds room.

`FairQueue` is an ASGI middleware in front of Gradio's routes. It reads Gradio's public protocol alone:

- a join (`POST …/queue/join`, and the REST API's `POST …/call/<api>`) is admitted or refused by the
  visitor's places (`QueueShares`), and the event id Gradio answers with names its place;
- the event streams (`GET …/queue/data?session_hash=…`, `GET …/call/<api>/<event_id>`) say when an
  event completes, which gives its place back;
- when a session's stream ends (the page closed), Gradio drops its waiting events, and their places go;
  so does the place of one still running, which its time bound ends (`Policy.request_seconds`) and
  which the readings' own rule keeps the visitor from doubling (`explorer.app.limits.Readings`); and
  so does that of a join answered after its session's stream ended, while none is open (a page closed
  as it asked for something: the layer view asks for its neighbours once idle), which no stream
  would ever give back; and that of a session's event whose stream did not open within
  UNHEARD_SECONDS of its join (the page opens it at once; one closed as it joined never does);
- a place whose stream never opened is given back after `stale` seconds.

The trivial events of the page (a tab's name kept, a flag set) skip the queue (`queue=False`): a click
on a tab would otherwise take four places at once.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import parse_qs

from explorer.app.visitors import MAX_SESSION_CHARS, Visitor, address_of

JOIN = re.compile(r"/gradio_api/(queue/join|call/(v2/)?(?P<api>[^/]+))/?$")
SESSION_STREAM = re.compile(r"/gradio_api/queue/data/?$")
EVENT_STREAM = re.compile(r"/gradio_api/call/(v2/)?[^/]+/(?P<event>[^/]+)/?$")
# The head of a message of the session stream: Gradio writes each as `data: {"msg":…,"event_id":…,…}`
MESSAGE = re.compile(rb'"msg"\s*:\s*"(?P<msg>\w+)"')
EVENT_ID = re.compile(rb'"event_id"\s*:\s*"(?P<id>[^"]{1,200})"')
HEAD_BYTES = 512  # of a message, searched for its kind and event id (what follows may be megabytes)
STALE_SECONDS = 900.0  # a place whose event's stream never opened is given back after this
PER_EVENT = 2  # places one visitor holds of one event
ENDED_SECONDS = 60.0  # a session's stream's end is remembered this long, for the joins being answered
UNHEARD_SECONDS = 30.0  # a session's event whose stream has not opened this long after its join goes


@dataclass(eq=False)
class Place:
    """One event's place in the queue, from its join until it completes."""

    visitor: Visitor
    event: str  # which of the app's events (its api name or index)
    since: float
    event_id: str = ""  # '' while the join is being answered
    heard: bool = False  # a stream of its session open since its join (one that reads its event)


@dataclass
class QueueShares:
    """How many places each visitor holds, by address and by session, and their giving back."""

    per_visitor: int
    stale: float = STALE_SECONDS
    clock: Callable[[], float] = time.monotonic
    _places: list[Place] = field(default_factory=list)
    _streams: dict[str, int] = field(default_factory=dict)  # session -> its streams open now
    _ended: dict[str, float] = field(default_factory=dict)  # session -> when its last stream ended
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def admit(self, visitor: Visitor, event: str = "") -> Place | str:
        """A place for the visitor's next `event`, or why there is none: its address or its session holds
        all of its places, or its address PER_EVENT of that event's."""
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
            if sum(p.event == event for p in by_address) >= PER_EVENT:
                return (
                    f"This app holds at most {PER_EVENT} of one kind of request at a time from one "
                    "visitor, and two of yours are waiting or running: try again once one has finished."
                )
            place = Place(visitor, event, self.clock())
            self._places.append(place)
            return place

    def joined(self, place: Place, event_id: str | None) -> None:
        """The queue answered the join: with the event's id, or refused it (None: the place goes). A
        place whose session's stream ended since its join, none open now, goes too: no stream is left
        to say when its event ends (were the page still there, it opens a stream to read the event:
        the place is then not counted, the kinder error)."""
        with self._lock:
            session = place.visitor.session
            unheard = (
                session and not self._streams.get(session) and self._ended.get(session, -1) >= place.since
            )
            if event_id and not unheard:
                place.event_id = event_id
                place.heard = place.heard or bool(self._streams.get(session))
            elif place in self._places:
                self._places.remove(place)

    def streaming(self, session: str) -> None:
        """A stream of the session's opened."""
        if session:
            with self._lock:
                self._streams[session] = self._streams.get(session, 0) + 1
                for place in self._places:
                    place.heard = place.heard or place.visitor.session == session

    def finished(self, event_id: str) -> None:
        with self._lock:
            self._places = [p for p in self._places if p.event_id != event_id]

    def closed(self, session: str = "", event_id: str = "") -> None:
        """A stream ended (the session's, or one event's): its events' places go."""
        with self._lock:
            if session:
                open_now = self._streams.pop(session, 1) - 1
                if open_now > 0:
                    self._streams[session] = open_now
                self._ended[session] = self.clock()
                self._forget_ended()
            self._places = [
                p
                for p in self._places
                if not (p.event_id and (p.event_id == event_id or (session and p.visitor.session == session)))
            ]

    def held(self, visitor: Visitor) -> int:
        with self._lock:
            self._expire()
            return sum(p.visitor.address == visitor.address for p in self._places)

    def _expire(self) -> None:
        now = self.clock()
        unheard = lambda p: p.visitor.session and not p.heard and now - p.since >= UNHEARD_SECONDS  # noqa: E731
        self._places = [p for p in self._places if now - p.since < self.stale and not unheard(p)]

    def _forget_ended(self) -> None:
        """Ends older than any place's join that is still being answered (a join is answered in
        moments; a minute is ample) are forgotten."""
        now = self.clock()
        self._ended = {s: t for s, t in self._ended.items() if now - t < ENDED_SECONDS}


class FairQueue:
    """ASGI middleware: Gradio's queue joins admitted by `QueueShares`, its streams read for the end of
    each event (see the module's notes)."""

    def __init__(self, app, shares: QueueShares, behind_proxy: bool):
        self.app, self.shares, self.behind_proxy = app, shares, behind_proxy

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path, method = scope["path"], scope["method"]
        if method == "POST" and JOIN.search(path):
            return await self._join(scope, receive, send)
        if method == "GET" and SESSION_STREAM.search(path):
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
            session = (query.get("session_hash") or [""])[0][:MAX_SESSION_CHARS]
            return await self._stream(scope, receive, send, session=session)
        stream = EVENT_STREAM.search(path) if method == "GET" else None
        if stream is not None:
            return await self._stream(scope, receive, send, event_id=stream["event"])
        return await self.app(scope, receive, send)

    async def _join(self, scope, receive, send):
        body, more = b"", True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            more = message.get("more_body", False)
        visitor, event = self._asked(scope, body)
        place = self.shares.admit(visitor, event)
        if isinstance(place, str):
            return await _refuse(send, place)
        replayed = False

        async def replay():
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        status, answer, answered = 0, b"", False

        async def capture(message):
            nonlocal status, answer, answered
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body":
                answer += message.get("body", b"")
                if not message.get("more_body", False):
                    # the place is named before the client has the event's id, so no end goes unheard
                    answered = True
                    self.shares.joined(place, _event_id(answer) if status == 200 else None)
            await send(message)

        try:
            await self.app(scope, replay, capture)
        finally:
            if not answered:
                self.shares.joined(place, None)

    def _asked(self, scope, body: bytes) -> tuple[Visitor, str]:
        """Who joins (address and session), and for which event (an API name, or the page's index)."""
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        client = scope.get("client")
        try:
            asked = json.loads(body)
        except (ValueError, RecursionError):
            asked = None
        asked = asked if isinstance(asked, dict) else {}
        session = asked.get("session_hash")
        session = session[:MAX_SESSION_CHARS] if isinstance(session, str) else ""
        named = JOIN.search(scope["path"])["api"]
        event = named or str(asked.get("fn_index", asked.get("trigger_id", "")))[:40]
        peer = client[0] if client else None
        return Visitor(address_of(headers, peer, self.behind_proxy), session), event

    async def _stream(self, scope, receive, send, session: str = "", event_id: str = ""):
        """Pass a stream on, giving back each event's place as it completes; when it ends, what is
        left of the session's (or the event's) places goes as `QueueShares.closed` says."""
        lines = _Lines()
        kind = ""

        async def watch(message):
            nonlocal kind
            if message["type"] == "http.response.body":
                for line in lines.feed(message.get("body", b"")):
                    if event_id:  # the REST API's stream: `event: complete` then its data
                        if line.startswith(b"event:"):
                            kind = line[6:].strip().decode("latin-1")
                        if kind in ("complete", "error"):
                            self.shares.finished(event_id)
                    else:
                        self._session_message(line)
            await send(message)

        self.shares.streaming(session)
        try:
            await self.app(scope, receive, watch)
        finally:
            self.shares.closed(session=session, event_id=event_id)

    def _session_message(self, line: bytes) -> None:
        head = line[:HEAD_BYTES]
        kind, named = MESSAGE.search(head), EVENT_ID.search(head)
        if kind is None or named is None:
            return
        if kind["msg"] in (b"process_completed", b"unexpected_error"):
            self.shares.finished(named["id"].decode("latin-1"))


class _Lines:
    """A stream's bytes as whole lines; of a long line (a completed event's figures) only its first
    HEAD_BYTES are kept, which is all that is read of it."""

    def __init__(self):
        self.partial = b""
        self.long = False

    def feed(self, chunk: bytes) -> list[bytes]:
        parts = chunk.split(b"\n")
        done = []
        for part in parts[:-1]:
            done.append(self._add(part))
            self.partial, self.long = b"", False
        self._add(parts[-1])
        return done

    def _add(self, part: bytes) -> bytes:
        if not self.long:
            self.partial += part
            if len(self.partial) > HEAD_BYTES:
                self.partial, self.long = self.partial[:HEAD_BYTES], True
        return self.partial


def _event_id(answer: bytes) -> str | None:
    try:
        event = json.loads(answer).get("event_id")
    except (ValueError, AttributeError):
        return None
    return event if isinstance(event, str) and event else None


async def _refuse(send, message: str) -> None:
    body = json.dumps({"detail": message, "error": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 429, "headers": headers})
    await send({"type": "http.response.body", "body": body})

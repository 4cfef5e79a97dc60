"""The ASGI middleware in front of Gradio's routes that keeps its queue in fair shares
(`explorer.app.fair_queue`). It reads Gradio's public protocol alone:

- a join (`POST …/queue/join`, and the REST API's `POST …/call/<api>`) is admitted or refused by the
  visitor's places (`QueueShares`), counted by the function it calls (its concurrency id), and the
  event id Gradio answers with names its place;
- the event streams (`GET …/queue/data?session_hash=…`, `GET …/call/<api>/<event_id>`) say that a
  place's event is read, when it completes, and when the stream ends;
- the events of places that went while nothing reads them are cancelled through Gradio's own
  `POST …/cancel`, at the next join or within SWEEP_SECONDS;
- a call of a component's server function (`POST …/component_server`: the layer view's `layer_pack`)
  is admitted as a join is, as a function of its own (COMPONENT_KIND and the function's name), and its
  place goes when its answer has been sent.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Mapping
from urllib.parse import parse_qs

from explorer.app.fair_queue import Function, Place, QueueShares
from explorer.app.visitors import MAX_SESSION_CHARS, Proxies, Visitor, address_of

JOIN = re.compile(r"/gradio_api/(queue/join|call/(v2/)?(?P<api>[^/]+))/?$")
COMPONENT_CALL = re.compile(r"/gradio_api/component_server/?$")
COMPONENT_KIND = "component:"  # a server function's kind: this and its name ("component:layer_pack")
SESSION_STREAM = re.compile(r"/gradio_api/queue/data/?$")
EVENT_STREAM = re.compile(r"/gradio_api/call/(v2/)?[^/]+/(?P<event>[^/]+)/?$")
# The head of a message of the session stream: Gradio writes each as `data: {"msg":…,"event_id":…,…}`
MESSAGE = re.compile(rb'"msg"\s*:\s*"(?P<msg>\w+)"')
EVENT_ID = re.compile(rb'"event_id"\s*:\s*"(?P<id>[^"]{1,200})"')
HEAD_BYTES = 512  # of a message, searched for its kind and event id (what follows may be megabytes)
SWEEP_SECONDS = 5.0  # how often places are looked at for their expiry while no join comes
log = logging.getLogger(__name__)


class FairQueue:
    """ASGI middleware: Gradio's queue joins admitted by `QueueShares`, its streams read for the end of
    each event, and the events of places that went cancelled (see the module's notes). `functions`: a
    join's function (its index as text, or its API name) -> what it runs; `proxies`: who stands
    between visitors and the app."""

    def __init__(self, app, shares: QueueShares, proxies: Proxies, functions: Mapping[str, Function]):
        self.app, self.shares, self.proxies, self.functions = app, shares, proxies, functions
        self._template: dict | None = None  # a join's scope, to call Gradio's cancel route with
        self._sweeper: asyncio.Task | None = None

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if self._sweeper is None:
            self._sweeper = asyncio.get_running_loop().create_task(self._sweep())
        path, method = scope["path"], scope["method"]
        if method == "POST" and JOIN.search(path):
            return await self._join(scope, receive, send)
        if method == "POST" and COMPONENT_CALL.search(path):
            return await self._component_call(scope, receive, send)
        if method == "GET" and SESSION_STREAM.search(path):
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
            session = (query.get("session_hash") or [""])[0][:MAX_SESSION_CHARS]
            return await self._stream(scope, receive, send, session=session)
        stream = EVENT_STREAM.search(path) if method == "GET" else None
        if stream is not None:
            return await self._stream(scope, receive, send, event_id=stream["event"])
        return await self.app(scope, receive, send)

    async def _join(self, scope, receive, send):
        body = await _body(receive)
        if body is None:
            return
        self._template = scope
        visitor, function = self._asked(scope, body)
        place = self.shares.admit(visitor, function.kind, function.index)
        await self._cancel_dropped()
        if isinstance(place, str):
            return await _refuse(send, place)
        replay = _replayed(body, receive)
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
            await self._cancel_dropped()

    async def _component_call(self, scope, receive, send):
        """A server function's call, admitted as a join (its session's and address's places, and PER_KIND
        of its function); its place goes once its answer is sent, or the call ends without one."""
        body = await _body(receive)
        if body is None:
            return
        asked = _json_object(body)
        name = asked.get("fn_name")
        kind = COMPONENT_KIND + (name[:40] if isinstance(name, str) else "")
        place = self.shares.admit(self._visitor(scope, asked), kind)
        if isinstance(place, str):
            return await _refuse(send, place)

        async def answer(message):
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                self.shares.joined(place, None)  # before the client has it: its next call finds room
            await send(message)

        try:
            await self.app(scope, _replayed(body, receive), answer)
        finally:
            self.shares.joined(place, None)

    def _visitor(self, scope, asked: dict) -> Visitor:
        """Who asks: the address (past the proxies the app trusts) and the session the request names."""
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope.get("headers", [])]
        client = scope.get("client")
        session = asked.get("session_hash")
        session = session[:MAX_SESSION_CHARS] if isinstance(session, str) else ""
        peer = client[0] if client else None
        return Visitor(address_of(headers, peer, self.proxies), session)

    def _asked(self, scope, body: bytes) -> tuple[Visitor, Function]:
        """Who joins (address and session), and for which function (by its index, or its API name)."""
        asked = _json_object(body)
        named = JOIN.search(scope["path"])["api"]
        key = named or str(asked.get("fn_index", asked.get("trigger_id", "")))[:40]
        function = self.functions.get(key) or Function(-1, key)
        return self._visitor(scope, asked), function

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

        self.shares.streaming(session=session, event_id=event_id)
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

    async def _sweep(self) -> None:
        """Cancel the events of places that went, while no join comes to do it."""
        while True:
            await asyncio.sleep(SWEEP_SECONDS)
            try:
                await self._cancel_dropped()
            except Exception:  # one failed cancel must not end the sweeping
                log.exception("cancelling the events of expired queue places failed")

    async def _cancel_dropped(self) -> None:
        for place in self.shares.take_dropped():
            await self._cancel(place)

    async def _cancel(self, place: Place) -> None:
        """Gradio's own `…/cancel` for the place's event: a waiting event leaves the queue, a running
        one's task is cancelled (its handler's time bound ends its work)."""
        if self._template is None:
            return
        join = self._template
        path = join["path"][: JOIN.search(join["path"]).start()] + "/gradio_api/cancel"
        body = json.dumps(
            {"session_hash": place.visitor.session, "fn_index": place.function, "event_id": place.event_id}
        ).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        scope = {**join, "method": "POST", "path": path, "raw_path": path.encode(), "query_string": b""}
        scope["headers"] = headers
        sent = False

        async def receive():
            nonlocal sent
            if sent:
                return {"type": "http.disconnect"}
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        async def discard(message):
            return None

        await self.app(scope, receive, discard)


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


async def _body(receive) -> bytes | None:
    """A request's whole body (None: the client left before sending it)."""
    body, more = b"", True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        body += message.get("body", b"")
        more = message.get("more_body", False)
    return body


def _replayed(body: bytes, receive):
    """A `receive` that gives the app the body read already, then whatever the client sends next."""
    replayed = False

    async def replay():
        nonlocal replayed
        if replayed:
            return await receive()
        replayed = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


def _json_object(body: bytes) -> dict:
    """A request's JSON body as an object ({} where it is not one)."""
    try:
        asked = json.loads(body)
    except (ValueError, RecursionError):
        return {}
    return asked if isinstance(asked, dict) else {}


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

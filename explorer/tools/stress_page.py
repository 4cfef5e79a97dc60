"""The served app as its own page speaks to it, for the stress run's round four: the page's config read
once (each event's index, inputs and targets), joins of any event by its index (`queue/join`, with event
data and headers of the caller's choosing), and a session's stream read for what the page would be told
(its place in the queue, toasts, the completed event)."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field

import httpx


@dataclass
class Heard:
    """What one session's stream said, by event id."""

    ranks: dict[str, list[tuple[int, int]]] = field(default_factory=dict)  # (rank, queue size) told
    toasts: list[str] = field(default_factory=list)  # the text of each toast (`log` message)
    done: dict[str, tuple[float, dict]] = field(default_factory=dict)  # when it completed, its message
    errors: list[str] = field(default_factory=list)  # the stream's own failures
    opened: float = 0.0  # when it began to be read (time.monotonic)


class Page:
    """The app's events as its page joins them."""

    def __init__(self, url: str, address: str | None = None, timeout: float = 60.0):
        self.url, self.address, self.timeout = url.rstrip("/"), address, timeout
        self.http = _client(address, timeout)
        self.config = self.http.get(f"{self.url}/config").json()
        self.components = {c["id"]: c for c in self.config["components"]}

    def fork(self) -> Page:
        """The same page over a connection pool of its own (for a thread of its own)."""
        forked = object.__new__(Page)
        forked.__dict__.update(self.__dict__, http=_client(self.address, self.timeout))
        return forked

    def event(self, elem_id: str, trigger: str, reading: str = "") -> dict:
        """The dependency that `trigger` of the component `elem_id` starts, with a backend function (and
        among its inputs the component `reading`, where one trigger starts several)."""
        ids = self.ids(elem_id)
        for dependency in self.config["dependencies"]:
            started = any(t[0] in ids and t[1] == trigger for t in dependency["targets"])
            reads = not reading or set(dependency["inputs"]) & self.ids(reading)
            if started and reads and dependency.get("backend_fn"):
                return dependency
        raise LookupError(f"no event {trigger!r} of #{elem_id}")

    def ids(self, elem_id: str) -> set[int]:
        return {c["id"] for c in self.config["components"] if c.get("props", {}).get("elem_id") == elem_id}

    def named(self, api_name: str) -> dict:
        return next(d for d in self.config["dependencies"] if d.get("api_name") == api_name)

    def alike(self, dependency: dict) -> list[dict]:
        """Every event that calls the same inputs into the same outputs as `dependency` (one handler
        wired under several events)."""
        same = lambda d: d["inputs"] == dependency["inputs"] and d["outputs"] == dependency["outputs"]  # noqa: E731
        return [d for d in self.config["dependencies"] if d.get("backend_fn") and same(d)]

    def values(self, dependency: dict, **by_elem_id) -> list:
        """The event's inputs at their defaults, those named by elem_id set."""
        values = []
        for i in dependency["inputs"]:
            props = self.components[i].get("props", {})
            values.append(by_elem_id.get(props.get("elem_id"), props.get("value")))
        return values

    def join(
        self, dependency: dict, data: list, session: str, event_data=None, headers: dict | None = None
    ) -> tuple[int, str]:
        """(HTTP status, event id or the refusal's text) of one join."""
        body = {
            "data": data,
            "fn_index": dependency["id"],
            "trigger_id": dependency["targets"][0][0] if dependency["targets"] else None,
            "session_hash": session,
            "event_data": event_data,
        }
        try:
            answer = self.http.post(
                f"{self.url}/gradio_api/queue/join",
                content=json.dumps(body, ensure_ascii=False),
                headers={"content-type": "application/json", **(headers or {})},
            )
        except httpx.HTTPError as error:
            return 0, f"{type(error).__name__}: {error}"[:200]
        try:
            said = answer.json()
        except ValueError:
            said = {"detail": answer.text[:200]}
        return answer.status_code, said.get("event_id") or str(said.get("detail", ""))

    def call_server(self, elem_id: str, name: str, data, session: str) -> tuple[int, dict | str]:
        """(HTTP status, answer or the refusal's text) of server function `name` of the component
        `elem_id` (the layer view's `layer_pack`), called as the page calls it."""
        (component,) = self.ids(elem_id)
        body = {"session_hash": session, "component_id": component, "fn_name": name, "data": data}
        try:
            answer = self.http.post(f"{self.url}/gradio_api/component_server", json=body)
        except httpx.HTTPError as error:
            return 0, f"{type(error).__name__}: {error}"[:200]
        try:
            return answer.status_code, answer.json()
        except ValueError:
            return answer.status_code, answer.text[:200]

    def answered(
        self, dependency: dict, data: list, session: str, seconds: float, headers: dict | None = None
    ) -> tuple[int, str, Heard]:
        """(HTTP status, event id or the refusal's text, what the stream said) of one join whose session's
        stream is then read until it ends, for at most `seconds` (not read where the join is refused)."""
        status, event = self.join(dependency, data, session, headers=headers)
        if status != 200:
            return status, event, Heard()
        listening, heard = self.listen(session, seconds)
        listening.join()
        return status, event, heard

    def listen(self, session: str, seconds: float) -> tuple[threading.Thread, Heard]:
        """Read the session's stream for at most `seconds` in a thread of its own."""
        heard = Heard(opened=time.monotonic())

        def read():
            deadline = time.monotonic() + seconds
            try:
                with self.http.stream(
                    "GET", f"{self.url}/gradio_api/queue/data", params={"session_hash": session}
                ) as stream:
                    for line in stream.iter_lines():
                        if line.startswith("data:"):
                            _note(heard, json.loads(line[5:]))
                        if time.monotonic() > deadline:
                            return
            except (httpx.HTTPError, ValueError) as error:
                heard.errors.append(f"{type(error).__name__}: {error}"[:200])

        thread = threading.Thread(target=read, daemon=True)
        thread.start()
        return thread, heard


def _client(address: str | None, timeout: float) -> httpx.Client:
    transport = httpx.HTTPTransport(local_address=address) if address else None
    return httpx.Client(timeout=timeout, transport=transport, limits=httpx.Limits(max_connections=None))


def _note(heard: Heard, message: dict) -> None:
    kind, event = message.get("msg"), message.get("event_id") or ""
    if kind == "estimation":
        heard.ranks.setdefault(event, []).append((message.get("rank") or 0, message.get("queue_size") or 0))
    elif kind == "log":
        heard.toasts.append(str(message.get("log", "")))
    elif kind in ("process_completed", "unexpected_error"):
        heard.done[event] = (time.monotonic(), message)

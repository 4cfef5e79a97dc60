"""The stress run's view of the served app from outside: its HTTP API called as a visitor's browser
calls it (`App`), a `Monitor` sampling the server's memory and timing the page while it runs, and the
served process waited for (`wait_until_up`) and kept within a memory limit (`guard`)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time

import httpx

from explorer.app import memory


class App:
    """The app's HTTP API as a visitor's browser uses it: /gradio_api/call/<endpoint>, state included."""

    def __init__(self, url: str, timeout: float, address: str | None = None):
        self.url = url.rstrip("/")
        # One client for every thread: an httpx client per request builds an SSL context each time
        # (0.4 s of CPU), which on two cores would starve the server being measured. `address`: the
        # local address it connects from (127.0.0.x), as visitors on other machines would.
        transport = httpx.HTTPTransport(local_address=address) if address else None
        limits = httpx.Limits(max_connections=None)
        self.http = httpx.Client(timeout=timeout, limits=limits, transport=transport)
        self.timeout = timeout

    def call(self, api: str, data: list, session: str | None = None, body: str | None = None):
        """(ok, outputs or error text) of one event within `timeout` seconds (checked as the server's
        heartbeats arrive); `body` sends raw JSON (a lone surrogate as \\ud800)."""
        deadline = time.monotonic() + self.timeout
        payload = body if body is not None else json.dumps({"data": data, "session_hash": session})
        headers = {"content-type": "application/json"}
        try:
            posted = self.http.post(f"{self.url}/gradio_api/call/{api}", content=payload, headers=headers)
            if posted.status_code != 200:
                return False, f"HTTP {posted.status_code}: {posted.text[:200]}"
            event = posted.json()["event_id"]
            with self.http.stream("GET", f"{self.url}/gradio_api/call/{api}/{event}") as stream:
                kind = None
                for line in stream.iter_lines():
                    if time.monotonic() > deadline:
                        return False, f"no answer within {self.timeout:g} s"
                    if line.startswith("event:"):
                        kind = line.split(":", 1)[1].strip()
                    elif line.startswith("data:") and kind in ("complete", "error"):
                        outputs = json.loads(line[5:])
                        return kind == "complete", outputs if kind == "complete" else f"error: {outputs}"
            return False, "the event stream ended without an answer"
        except (httpx.HTTPError, ValueError, KeyError) as error:
            return False, f"{type(error).__name__}: {error}"[:200]


def status_of(outputs) -> str:
    """The status line's text (the first output of every event), tags removed."""
    return re.sub(
        r"<[^>]+>",
        "",
        outputs[0] if isinstance(outputs, list) and outputs and isinstance(outputs[0], str) else "",
    )


class Monitor(threading.Thread):
    """Samples the server's resident memory every 0.1 s and times `GET /` every 0.25 s."""

    def __init__(self, url: str, pid: int):
        super().__init__(daemon=True)
        self.url, self.pid, self.stop = url, pid, threading.Event()
        # a connection of its own for each GET, as a new visitor's page load: a kept-alive one can be
        # closed by the server just as it is reused (reset by peer), which would count as 30 s
        self.http = httpx.Client(timeout=30, limits=httpx.Limits(max_keepalive_connections=0))
        self.rss: list[tuple[float, int]] = []
        self.pages: list[tuple[float, float]] = []  # (start, seconds); a failed GET counts as 30 s
        self.errors: list[tuple[float, str]] = []  # (start, what went wrong) of each failed GET
        self._gets: list[threading.Thread] = []

    def run(self):
        next_page = 0.0
        while not self.stop.is_set():
            now = time.monotonic()
            self.rss.append((now, memory.rss_bytes(self.pid)))
            if now >= next_page:
                get = threading.Thread(target=self._page, args=(now,), daemon=True)
                get.start()
                self._gets.append(get)
                next_page = now + 0.25
            time.sleep(0.1)

    def finish(self) -> None:
        """Stop sampling and wait for the GETs in flight, so that stopping the server fails none."""
        self.stop.set()
        self.join()
        for get in self._gets:
            get.join(timeout=30)

    def _page(self, start: float):
        try:
            answer = self.http.get(self.url)
            error = "" if answer.status_code == 200 else f"HTTP {answer.status_code}"
        except httpx.HTTPError as failure:
            error = f"{type(failure).__name__}: {failure}"[:120]
        self.pages.append((start, 30.0 if error else time.monotonic() - start))
        if error:
            self.errors.append((start, error))


def wait_until_up(url: str, server: subprocess.Popen, seconds: float = 120.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the app exited at startup: {server.stderr.read()[-2000:]}")
        try:
            if httpx.get(url, timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"the app did not answer {url} within {seconds:.0f} s")


def guard(server: subprocess.Popen, limit: float, stop: threading.Event) -> None:
    """Kill the server if its memory passes `limit` (a run of unbounded code must not take the machine)."""
    while not stop.is_set() and server.poll() is None:
        if memory.rss_bytes(server.pid) > limit:
            print(f"the server passed {limit / 1e9:g} GB and was killed", file=sys.stderr)
            server.kill()
            return
        time.sleep(0.1)

"""The long jobs each page runs (a circuit, a patching sweep, the flow graph, the lens, a model's load):
a sign of life while one runs, and a way to end it.

- A job runs inside `Jobs.running(session, what)`: the engine's steps tell it how far the work is
  (`engine.deadline.steps`), and `Progress` shows that fraction with an estimate of the time left
  ("about 40 s left": the time so far, times what is left over what is done) through `show`, which the
  page's layout makes Gradio's progress on the status line.
- The page's Stop calls `Jobs.stop(session)`: every job of that page's session under way has its stop
  set, and ends at its next step (`engine.deadline.check`) with a StoppedError, whose message the
  status line shows; the thread computing it is free at once, not left to finish unseen (as Gradio's
  `cancels=` leaves it).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from explorer.engine import deadline

SHOW_SECONDS = 0.25  # progress is shown at most this often (each is a message to the page)
ESTIMATE_AFTER_SECONDS = 1.0  # no estimate of the time left before the job has run this long
STARTING = "estimating the time left"


def time_left(elapsed: float, done: float) -> str:
    """About how long work `done` (0 to 1) of the way after `elapsed` seconds has left, as a person
    reads it ("about 40 s left", "about 3 min left"), or STARTING while too little has passed to say."""
    if done <= 0 or elapsed < ESTIMATE_AFTER_SECONDS:
        return STARTING
    if done >= 1:
        return "finishing"
    left = elapsed * (1 - done) / done
    if left < 100:
        return f"about {max(1, math.ceil(left))} s left"
    return f"about {math.floor(left / 60 + 0.5)} min left"


class Progress:
    """One job's progress as the page shows it: the fraction done (never falling) and the time left,
    sent to `show(fraction, text)` at most every SHOW_SECONDS and whenever the work is done."""

    def __init__(self, show: Callable[[float, str], None], clock: Callable[[], float] = time.monotonic):
        self.show, self.clock = show, clock
        self.started = clock()
        self.done = 0.0
        self.shown_at = -math.inf

    def told(self, fraction: float, note: str = "") -> None:
        """The work is `fraction` done (`note`: the stage it is at, shown before the time left)."""
        self.done = max(self.done, min(1.0, float(fraction)))
        now = self.clock()
        if now - self.shown_at < SHOW_SECONDS and self.done < 1:
            return
        self.shown_at = now
        text = time_left(now - self.started, self.done)
        self.show(self.done, f"{note}: {text}" if note else text)


class Jobs:
    """The jobs under way, by the page session that asked for each, and their stops."""

    def __init__(self, show: Callable[[float, str], None], clock: Callable[[], float] = time.monotonic):
        self.show, self.clock = show, clock
        self._stops: dict[str, set[threading.Event]] = {}
        self._lock = threading.Lock()

    @contextmanager
    def running(self, session: str, what: str) -> Iterator[Progress]:
        """Work inside is one of `session`'s jobs: followed (its steps, or whoever is given the
        Progress, tell how far it is) and ended at its next step by `stop(session)`, with a
        StoppedError naming `what`."""
        stop, progress = threading.Event(), Progress(self.show, self.clock)
        with self._lock:
            if session:  # a request of no page (no session) is followed, but no Stop reaches it
                self._stops.setdefault(session, set()).add(stop)
        try:
            with deadline.job(stop, what, progress.told):
                progress.told(0.0)
                yield progress
        finally:
            with self._lock:
                stops = self._stops.get(session, set())
                stops.discard(stop)
                if not stops:
                    self._stops.pop(session, None)

    def stop(self, session: str) -> int:
        """Stop every job of `session` under way; how many there were."""
        with self._lock:
            stops = list(self._stops.get(session, ()))
        for stop in stops:
            stop.set()
        return len(stops)

    def running_in(self, session: str) -> int:
        """How many of `session`'s jobs are under way."""
        with self._lock:
            return len(self._stops.get(session, ()))

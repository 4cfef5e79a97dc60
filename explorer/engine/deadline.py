"""A time bound around a piece of work. Whoever asks for one (the app sets one per request on a public
server) wraps the work in `bounded`; the engine's long loops (every block of the one forward, every block of
queries, every layer of a reading) call `check`, which stops the work with a LimitError once the time is
up. Without a bound, `check` costs a context variable's read.

    with deadline.bounded(60.0, "the flow graph", "raise the threshold or shorten the prompt"):
        run.information_flow(...)     # LimitError after 60 s, between two steps of its loops

The bound lives in a context variable, so it holds for the thread (or task) that set it alone: two
requests computed at once each keep their own.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from explorer.errors import LimitError


@dataclass(frozen=True)
class Bound:
    at: float  # time.monotonic() past which the work stops
    seconds: float
    what: str  # the work, as the message names it
    instead: str  # what to ask for instead


_bound: ContextVar[Bound | None] = ContextVar("explorer_deadline", default=None)


@contextmanager
def bounded(seconds: float | None, what: str, instead: str = "") -> Iterator[None]:
    """Work inside stops at `check` once `seconds` have passed (None or 0: no bound, but an outer one's).
    A bound set inside another cannot outlast it, and names its own work in the message."""
    with until(time.monotonic() + seconds if seconds else None, seconds or 0.0, what, instead):
        yield


@contextmanager
def until(at: float | None, seconds: float, what: str, instead: str = "") -> Iterator[None]:
    """As `bounded`, to a time on time.monotonic()'s clock (a stream's steps share one), `seconds` being
    the bound the message names."""
    outer = _bound.get()
    if at is None and outer is None:
        yield
        return
    if outer is not None and (at is None or outer.at <= at):
        at, seconds = outer.at, outer.seconds
    token = _bound.set(Bound(at, seconds, what, instead))
    try:
        yield
    finally:
        _bound.reset(token)


def check() -> None:
    """Raise LimitError if the bound set around this work has passed."""
    bound = _bound.get()
    if bound is not None and time.monotonic() > bound.at:
        instead = f": {bound.instead.rstrip('.')}." if bound.instead else "."
        raise LimitError(
            f"{bound.what[:1].upper()}{bound.what[1:]} was stopped after {bound.seconds:g} s, "
            f"this app's limit for one request (EXPLORER_REQUEST_SECONDS){instead}"
        )

"""A time bound and a stop around a piece of work, and how far it is. Whoever asks for a bound (the app
sets one per request on a public server) wraps the work in `bounded`; whoever may stop the work or
follows it (the app, for each visitor's job: the page's Stop, its progress line) wraps it in `job`. The
engine's long loops (every block of the one forward, every block of queries, every layer of a reading)
call `check`, which stops the work with a LimitError once the time is up, or a StoppedError once the
job's stop is set; the loops that know their length go through `steps`, which checks before each step
and tells the job how far the work is after each.

    with deadline.bounded(60.0, "the flow graph", "raise the threshold or shorten the prompt"):
        run.information_flow(...)     # LimitError after 60 s, between two steps of its loops

    with deadline.job(stop, "the patching sweep", report):   # report(fraction done) as it goes
        for batch in deadline.steps(batches, [b.size for b in batches]):   # shares by weight
            for layer in deadline.steps(range(n_layers)):    # a step's own steps split its share
                ...                                           # StoppedError at a step once stop is set

The bound and the job live in context variables, so they hold for the thread (or task) that set them
alone: two requests computed at once each keep their own. Without either, `check` and `steps` cost a
context variable's read a step.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import TypeVar

from explorer.errors import LimitError, StoppedError

T = TypeVar("T")


@dataclass(frozen=True)
class Bound:
    at: float  # time.monotonic() past which the work stops
    seconds: float
    what: str  # the work, as the message names it
    instead: str  # what to ask for instead


@dataclass(frozen=True)
class Job:
    stop: threading.Event  # set, from any thread, to end the work at its next check
    what: str  # the work, as the message names it
    report: Callable[[float], None]  # told the fraction of the work done (0 to 1, never falling)


@dataclass
class _Part:
    """The share of its job a piece of work is, as fractions of the whole job: from `start` to `end`,
    its next step starting at `at`."""

    start: float
    end: float
    at: float


_bound: ContextVar[Bound | None] = ContextVar("explorer_deadline", default=None)
_job: ContextVar[Job | None] = ContextVar("explorer_job", default=None)
_part: ContextVar[_Part | None] = ContextVar("explorer_job_part", default=None)


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


@contextmanager
def job(stop: threading.Event, what: str, report: Callable[[float], None]) -> Iterator[None]:
    """Work inside ends at its next `check` once `stop` is set, with a StoppedError naming `what`, and
    tells `report` the fraction of it done as its `steps` go (a job inside another is followed and
    stopped as itself)."""
    job_token = _job.set(Job(stop, what, report))
    part_token = _part.set(_Part(0.0, 1.0, 0.0))
    try:
        yield
    finally:
        _part.reset(part_token)
        _job.reset(job_token)


def check() -> None:
    """Raise LimitError if the bound set around this work has passed, StoppedError if its job's stop is
    set."""
    bound = _bound.get()
    if bound is not None and time.monotonic() > bound.at:
        instead = f": {bound.instead.rstrip('.')}." if bound.instead else "."
        raise LimitError(
            f"{bound.what[:1].upper()}{bound.what[1:]} was stopped after {bound.seconds:g} s, "
            f"this app's limit for one request (EXPLORER_REQUEST_SECONDS){instead}"
        )
    stopped()


def stopped() -> None:
    """Raise StoppedError if the job's stop is set (work no time bound covers, a model's load, checks
    this alone)."""
    current = _job.get()
    if current is not None and current.stop.is_set():
        raise StoppedError(f"Stopped {current.what} at your request.")


def steps(items: Iterable[T], weights: Sequence[float] | None = None) -> Iterator[T]:
    """Each of `items` as a step of the work around it, its share in proportion to its weight (equal
    without `weights`): `check` before each, the job told how far the work is after each. A step's own
    steps (or `part`s) split its share. Iterate to the end, or break out."""
    items = list(items)
    weights = [1.0] * len(items) if weights is None else [max(0.0, float(w)) for w in weights]
    if len(weights) != len(items):
        raise ValueError(f"{len(items)} steps with {len(weights)} weights")
    total = sum(weights)
    for item, weight in zip(items, weights, strict=True):
        check()
        with part(weight / total if total else 1.0 / len(items)):
            yield item


@contextmanager
def part(share: float) -> Iterator[None]:
    """The work inside as the next `share` (0 to 1) of the work around it: once it ends, the job is
    told that much more is done; its own steps split the share."""
    outer = _part.get()
    if outer is None:
        yield
        return
    start = outer.at
    end = start + share * (outer.end - outer.start)
    end = outer.end if end > outer.end - 1e-9 else end  # the last share ends where the outer part does
    token = _part.set(_Part(start, end, start))
    try:
        yield
    except BaseException:
        _reset(token)
        raise
    _reset(token)
    outer.at = end
    current = _job.get()
    if current is not None:
        current.report(end)


def _reset(token: Token) -> None:
    """The part before a step's, back; a step whose loop was left by an error and closed later, from
    another context (a generator collected late), leaves that context as it is."""
    with suppress(ValueError, RuntimeError):
        _part.reset(token)

"""A reading's working memory, told as it goes. A reading whose size is known only as it runs (the flow graph
reaches more positions layer by layer) calls `need(nbytes)` before each step with what that step will hold;
whoever meters it (the app's workspace, counting it in its budget) makes room for it or refuses with a
LimitError. Without a meter, `need` costs a context variable's read.

    with working_memory.metered(reservation.resize):
        run.information_flow(...)     # need(...) before each layer: the budget follows the graph
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_meter: ContextVar[Callable[[int], None] | None] = ContextVar("explorer_working_memory", default=None)


@contextmanager
def metered(meter: Callable[[int], None]) -> Iterator[None]:
    """Work inside tells `meter` each step's working memory (it may raise to refuse the step)."""
    token = _meter.set(meter)
    try:
        yield
    finally:
        _meter.reset(token)


def need(nbytes: int) -> None:
    """The next step holds about `nbytes`: tell the meter, if one is set."""
    meter = _meter.get()
    if meter is not None:
        meter(nbytes)

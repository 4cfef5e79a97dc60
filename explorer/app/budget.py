"""One memory budget over what the app keeps (`explorer.app.workspace`): entries by key, least recently
used dropped first once everything together passes it, and the working memory readings reserve while
they run.

- A model is kept under its key (a string), a run under a tuple that starts with its model's key, a
  generation under a `GenerationKey`, what other parts of the app keep under keys of their own kinds.
  Dropping a model drops its runs and generations, which hold it: an evicted model is freed, not kept
  alive by them.
- Sizes are measured again whenever the entries are trimmed: a run grows as its layers are looked at, a
  generation as it steps.
- A reservation (`reserve`) is counted while its reading runs: what it needs is made room for, as a run
  would be, and one that would not fit beside what the reading reads is refused before it starts.
"""

from __future__ import annotations

import functools
import itertools
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from explorer.app import memory
from explorer.app.kept import GenerationKey, holds, model_nbytes
from explorer.engine.run import Run
from explorer.errors import LimitError
from explorer.explorer import Explorer


class Budget:
    """Entries kept within `max_bytes`, most recently used last."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self._entries: OrderedDict = OrderedDict()  # key -> Explorer, CachedRun, KeptGeneration, or another's
        self._serials = itertools.count()
        self._reserved: dict[int, int] = {}  # bytes of the readings running now, by a serial of their own
        self._lock = threading.RLock()

    def serial(self) -> int:
        """A number no other caller gets: a generation's, or a reservation's."""
        return next(self._serials)

    def held(self) -> list:
        """Every key held, least recently used first."""
        with self._lock:
            return list(self._entries)

    def __contains__(self, key) -> bool:
        return key in self._entries

    def insert(self, entries: dict):
        """Add entries not already held (a run's model first: it may have been dropped meanwhile, and a
        run must not hold a model the budget no longer counts), mark them most recently used, trim
        around them; the last entry's value as held."""
        with self._lock:
            for key, value in entries.items():
                self._entries.setdefault(key, value)
            held = self.touch(*entries)
            dropped = self._trim(keep=set(entries))
        if dropped:
            memory.release()  # outside the lock: collecting and trimming the heap takes a moment
        return held

    def touch(self, *keys):
        """The last of `keys`' values, each marked most recently used (a run's model before it); None if
        one is missing."""
        with self._lock:
            if not all(key in self._entries for key in keys):
                return None
            for key in keys:
                self._entries.move_to_end(key)
            return self._entries[keys[-1]]

    def forget(self, which: Callable[[object], bool]) -> None:
        """The entries under the keys `which` picks, dropped (never a model or a run)."""
        with self._lock:
            for key in [k for k in self._entries if which(k) and not isinstance(k, str | tuple)]:
                del self._entries[key]

    @contextmanager
    def reserve(self, nbytes: int, what: str, run: Run | None = None) -> Iterator[Callable[[int], None]]:
        """`nbytes` of working memory counted while the block inside runs: older entries dropped to make
        room (never `run` and its model, which the reading reads); LimitError, naming both sizes, if it
        cannot fit beside what must stay. Yields `resize(nbytes)`, for a reading whose size grows as it
        goes (the same rules; a size that cannot fit leaves the one before)."""
        serial = self.serial()
        with self._lock:
            keep = {key for key, value in self._entries.items() if holds(value, run)}
            keep |= {_model_of(key) for key in keep}
        resize = functools.partial(self.make_room, serial, keep=keep, what=what)
        resize(nbytes)
        try:
            yield resize
        finally:
            self.release(serial)

    def release(self, serial: int) -> None:
        """Reservation `serial` no longer counted."""
        with self._lock:
            self._reserved.pop(serial, None)

    def make_room(self, serial: int, nbytes: int, keep: set, what: str) -> None:
        """Reservation `serial` set to `nbytes`, entries not in `keep` dropped to make room; refused
        (LimitError, the reservation as it was) if it cannot fit."""
        with self._lock:
            before = self._reserved.get(serial)
            self._reserved[serial] = nbytes
            dropped = self._trim(keep)
            if self._total() > self.max_bytes:
                if before is None:
                    del self._reserved[serial]
                else:
                    self._reserved[serial] = before
                beside = sum(_size(key, self._entries[key]) for key in keep if key in self._entries)
                raise LimitError(
                    f"{what[:1].upper()}{what[1:]} needs about {nbytes / 1e9:.2f} GB of working memory; "
                    f"this app's memory budget is {self.max_bytes / 1e9:.2f} GB (EXPLORER_MEMORY_GB), "
                    f"{beside / 1e9:.2f} GB of it the model and run it reads: use a shorter prompt."
                )
        if dropped:
            memory.release()

    def nbytes(self) -> int:
        """Everything held, and the working memory reserved by readings running now."""
        with self._lock:
            return self._total()

    def _total(self) -> int:
        held = sum(_size(key, value) for key, value in self._entries.items())
        return held + sum(self._reserved.values())

    def _trim(self, keep: set) -> bool:
        """Drop least recently used entries while the total (readings' reservations included) passes
        the budget; what the request in hand uses (`keep`) stays. A model goes with its runs. Whether
        anything was dropped."""
        sizes = {key: _size(key, value) for key, value in self._entries.items()}
        total, dropped = sum(sizes.values()) + sum(self._reserved.values()), False
        for key in list(self._entries):
            if total <= self.max_bytes:
                break
            if key in keep or key not in self._entries:
                continue
            going = [key]
            if isinstance(key, str):  # a model: its runs and generations go with it
                going += [k for k in self._entries if _model_of(k) == key and k != key]
            for k in going:
                total -= sizes[k]
                del self._entries[k]
            dropped = True
        return dropped


def _model_of(key) -> str:
    if isinstance(key, GenerationKey):
        return key.model
    return key[0] if isinstance(key, tuple) else key


def _size(key, value) -> int:
    if isinstance(value, Explorer):
        return model_nbytes(value) + sys.getsizeof(key)
    return value.nbytes()  # its text is the key's: one string, counted once

"""A reading's result that a page shows and reads again (the Circuit tab's circuit, Intervene's patching
sweep), kept in the workspace's budget like a run rather than in the page's session state, which no
budget counts and which lasts, for a client that never opens Gradio's heartbeat, until Gradio's cap
on sessions.

- A result is kept under a `ResultKey` of its session's (`keep`), in place of the session's earlier
  result of its kind: one circuit and one sweep a session at most, counted at their size in memory
  (`held_bytes`), least recently used dropped first to make room, as runs are.
- The page's gr.State holds the key alone (`explorer.app.ui.sessions`); `result` answers None once
  the result was dropped, so the page says so.
- A session's results go when it ends (`end_session`), or one by one when the page's key expires
  (`forget`).
"""

from __future__ import annotations

import dataclasses
import itertools
import sys
from dataclasses import dataclass

import numpy as np
import torch

from explorer.app.workspace import Workspace

_serials = itertools.count()


@dataclass(frozen=True)
class ResultKey:
    """Names one kept result: its session, its kind ("circuit", "sweep") and a serial number."""

    session: str
    kind: str
    serial: int


@dataclass(frozen=True, eq=False)
class KeptResult:
    value: object
    size: int  # bytes, measured as it was kept (a result does not grow)

    def nbytes(self) -> int:
        return self.size


def keep(workspace: Workspace, session: str, kind: str, value) -> ResultKey:
    """`value` kept in `workspace`'s budget in place of `session`'s earlier result of `kind`."""
    key, kept = ResultKey(session, kind, next(_serials)), KeptResult(value, held_bytes(value))
    workspace.forget(lambda k: isinstance(k, ResultKey) and (k.session, k.kind) == (session, kind))
    workspace.keep(key, kept)
    return key


def result(workspace: Workspace, key: ResultKey | None):
    """The result kept under `key`; None for no key, and once the result was dropped."""
    kept = workspace.kept(key) if isinstance(key, ResultKey) else None
    return None if kept is None else kept.value


def forget(workspace: Workspace, key: ResultKey | None) -> None:
    """The result under `key` dropped."""
    workspace.forget(lambda k: isinstance(k, ResultKey) and k == key)


def end_session(workspace: Workspace, session: str) -> None:
    """Every result of `session` dropped."""
    workspace.forget(lambda k: isinstance(k, ResultKey) and k.session == session)


def held_bytes(value) -> int:
    """What `value` holds in memory: arrays' and tensors' data, and the Python objects of its containers
    and dataclasses (their cached properties too), each object counted once. Other objects count as
    themselves alone (a result holds no model)."""
    seen: set[int] = set()  # objects' ids
    storages: set[int] = set()  # tensors' data, by address

    def size(item) -> int:
        if id(item) in seen:
            return 0
        seen.add(id(item))
        if isinstance(item, np.ndarray):  # its size holds its data when it owns it; a view holds its base
            if item.flags.owndata:
                return sys.getsizeof(item)
            return sys.getsizeof(item) + (
                size(item.base) if isinstance(item.base, np.ndarray) else item.nbytes
            )
        if isinstance(item, torch.Tensor):
            storage = item.untyped_storage()
            shared = storage.data_ptr() in storages
            storages.add(storage.data_ptr())
            return sys.getsizeof(item) + (0 if shared else storage.nbytes())
        if isinstance(item, dict):
            inside = [*item.keys(), *item.values()]
        elif isinstance(item, list | tuple | set | frozenset):
            inside = list(item)
        elif dataclasses.is_dataclass(item) and not isinstance(item, type):
            names = {field.name for field in dataclasses.fields(item)}
            inside = [getattr(item, name) for name in names]
            # and what its cached properties keep (a graph's edges, once drawn)
            inside += [value for name, value in getattr(item, "__dict__", {}).items() if name not in names]
        else:
            inside = []
        return sys.getsizeof(item) + sum(map(size, inside))

    return size(value)

"""What the app keeps in memory, shared by every visitor and bounded: loaded models, and runs of
(model, prompt) or, with heads ablated, of (model, prompt, ablation), each dropped least-recently-used
once their bytes pass a budget.

A run grows as its layers are looked at (each eager layer is cached inside the Run), so sizes are
measured again whenever the cache is trimmed, not only when an entry arrives.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

import numpy as np
import torch

from explorer.interventions import Ablation
from explorer.run import Explorer, Run, load

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

DEFAULT_RUN_BYTES = 1 << 30  # every cached run together
DEFAULT_MODEL_BYTES = 4 << 30  # every loaded model's weights together
EAGER_BYTES_PER_RUN = 128 << 20  # eager layers one run keeps


class LruCache(Generic[K, V]):
    """Values by key; least recently used dropped first while the total size passes `max_bytes`.
    The newest entry always stays, however large. Safe to share between threads."""

    def __init__(self, max_bytes: int, size: Callable[[V], int]):
        self.max_bytes = max_bytes
        self._size = size
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def __contains__(self, key: K) -> bool:
        return key in self._entries

    def get(self, key: K) -> V | None:
        with self._lock:
            if key not in self._entries:
                return None
            self._entries.move_to_end(key)
            self._trim()
            return self._entries[key]

    def put(self, key: K, value: V) -> None:
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            self._trim()

    def get_or_create(self, key: K, create: Callable[[], V]) -> V:
        """The cached value, or a new one from `create` (called outside the lock)."""
        value = self.get(key)
        if value is None:
            value = create()
            self.put(key, value)
        return value

    def nbytes(self) -> int:
        with self._lock:
            return sum(self._size(v) for v in self._entries.values())

    def _trim(self) -> None:
        sizes = [self._size(v) for v in self._entries.values()]
        total = sum(sizes)
        for key, size in zip(list(self._entries), sizes[:-1], strict=False):
            if total <= self.max_bytes:
                break
            del self._entries[key]
            total -= size


@dataclass(eq=False)
class CachedRun:
    """A run and what the app derived from it that is worth keeping (the overview's head profile)."""

    run: Run
    profile: dict[str, np.ndarray] | None = None  # {name: [L, H]}, filled when the Overview opens

    def nbytes(self) -> int:
        return self.run.cache_nbytes()


def model_nbytes(explorer: Explorer) -> int:
    return sum(p.numel() * p.element_size() for p in explorer.model.parameters())


class Workspace:
    """The models and runs the app holds. A model is named by what a person typed: '' (or None) for
    the default model, else a local directory or a hub id."""

    def __init__(
        self,
        default_model: str | Path | None = None,
        device: torch.device | str | None = None,
        max_run_bytes: int = DEFAULT_RUN_BYTES,
        max_model_bytes: int = DEFAULT_MODEL_BYTES,
    ):
        self.default_model = default_model
        self.device = device
        self.models: LruCache[str, Explorer] = LruCache(max_model_bytes, model_nbytes)
        # keyed (model, prompt), or (model, prompt, ablation) for a run with heads ablated
        self.runs: LruCache[tuple, CachedRun] = LruCache(max_run_bytes, CachedRun.nbytes)

    def explorer(self, model: str | None, progress=None) -> Explorer:
        """The loaded model (loading it first if needed, telling `progress(fraction, message)` each
        stage; raises CheckpointError)."""
        name = (model or "").strip()
        return self.models.get_or_create(
            name, lambda: load(name or self.default_model, self.device, progress=progress)
        )

    def cached_run(self, model: str | None, text: str, ablation: Ablation | None = None) -> CachedRun:
        """The run of `text` on `model`: one fast forward the first time, none after (raises PromptError).
        With an `ablation` (heads zeroed or mean-replaced), a run of its own, kept beside the plain one."""
        name = (model or "").strip()
        explorer = self.explorer(name)

        def forward() -> CachedRun:
            if ablation is None:
                run = explorer.run(text)
            else:
                run = explorer.run(text, ablate=ablation.heads, ablate_mode=ablation.mode)
            run.eager_cache_bytes = EAGER_BYTES_PER_RUN
            return CachedRun(run)

        key = (name, text) if ablation is None else (name, text, ablation)
        return self.runs.get_or_create(key, forward)

    def run(self, model: str | None, text: str, ablation: Ablation | None = None) -> Run:
        return self.cached_run(model, text, ablation).run

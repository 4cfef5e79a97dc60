"""What the app keeps in memory, shared by every visitor and bounded: loaded models, runs of (model,
prompt), and generations, each dropped least-recently-used once their bytes pass a budget.

A run grows as its layers are looked at (each eager layer is cached inside the Run), and a generation
as it steps, so sizes are measured again whenever a cache is trimmed, not only when an entry arrives.

A generation is kept under a `GenerationKey` of its own, and its sequence's Run under (model, that key)
beside the prompts' runs: no prompt is a GenerationKey, so a typed prompt never finds a generated run
(whose ids need not be the prompt's tokenization of its text), and every view reads either alike.
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, TypeVar

import numpy as np
import torch

from explorer.generate import Generation, Step
from explorer.run import Explorer, Run, load

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

DEFAULT_RUN_BYTES = 1 << 30  # every cached run together
DEFAULT_MODEL_BYTES = 4 << 30  # every loaded model's weights together
DEFAULT_GENERATION_BYTES = 1 << 30  # every kept generation together (cache, block inputs, step rows)
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


@dataclass(frozen=True)
class GenerationKey:
    """Names one generation in the workspace: the model it ran on ('' the default) and a serial number."""

    model: str
    serial: int


@dataclass(eq=False)
class KeptGeneration:
    """A generation and the lock that makes its steps, its Run and every read of it take turns."""

    generation: Generation
    lock: threading.Lock = field(default_factory=threading.Lock)

    def nbytes(self) -> int:
        g = self.generation
        tensors = (g.layer_inputs, g.final_hidden, *(step.attention for step in g.steps))
        return g.cache.nbytes() + sum(t.numel() * t.element_size() for t in tensors)


class Workspace:
    """The models and runs the app holds. A model is named by what a person typed: '' (or None) for
    the default model, else a local directory or a hub id."""

    def __init__(
        self,
        default_model: str | Path | None = None,
        device: torch.device | str | None = None,
        max_run_bytes: int = DEFAULT_RUN_BYTES,
        max_model_bytes: int = DEFAULT_MODEL_BYTES,
        max_generation_bytes: int = DEFAULT_GENERATION_BYTES,
    ):
        self.default_model = default_model
        self.device = device
        self.models: LruCache[str, Explorer] = LruCache(max_model_bytes, model_nbytes)
        self.runs: LruCache[tuple[str, str | GenerationKey], CachedRun] = LruCache(
            max_run_bytes, CachedRun.nbytes
        )
        self.generations: LruCache[GenerationKey, KeptGeneration] = LruCache(
            max_generation_bytes, KeptGeneration.nbytes
        )
        self._serials = itertools.count()

    def explorer(self, model: str | None, progress=None) -> Explorer:
        """The loaded model (loading it first if needed, telling `progress(fraction, message)` each
        stage; raises CheckpointError)."""
        name = (model or "").strip()
        return self.models.get_or_create(
            name, lambda: load(name or self.default_model, self.device, progress=progress)
        )

    def cached_run(self, model: str | None, text: str | GenerationKey) -> CachedRun:
        """The run of `text` on `model`: one fast forward the first time, none after (raises PromptError).
        For a GenerationKey, the generated sequence's run, built from the kept generation (no forward)."""
        name = (model or "").strip()
        if isinstance(text, GenerationKey):
            return self.runs.get_or_create((name, text), lambda: self._generated_run(name, text))
        explorer = self.explorer(name)

        def forward() -> CachedRun:
            run = explorer.run(text)
            run.eager_cache_bytes = EAGER_BYTES_PER_RUN
            return CachedRun(run)

        return self.runs.get_or_create((name, text), forward)

    def run(self, model: str | None, text: str) -> Run:
        return self.cached_run(model, text).run

    def generate(self, model: str | None, prompt: str, **settings) -> GenerationKey:
        """A new generation of `prompt` on `model` (`settings` as `Explorer.generate` takes them, checked
        here: raises PromptError or ValueError), kept under a key of its own; `steps(key)` takes its
        steps. Nothing runs the model until the first step."""
        name = (model or "").strip()
        generation = self.explorer(name).generate(prompt, **settings)
        key = GenerationKey(name, next(self._serials))
        self.generations.put(key, KeptGeneration(generation))
        return key

    def steps(self, key: GenerationKey) -> Iterator[Step]:
        """The generation's steps as it takes them, each taken holding its lock (not while the caller
        holds the step): closing this iterator stops the generation after the step being taken."""
        kept = self._kept(key)
        steps = iter(kept.generation)
        while True:
            with kept.lock:
                step = next(steps, None)
            if step is None:
                return
            yield step

    @contextmanager
    def generation(self, key: GenerationKey) -> Iterator[Generation]:
        """The kept generation, read while no step is being taken (raises ValueError once it is dropped)."""
        kept = self._kept(key)
        with kept.lock:
            yield kept.generation

    def _kept(self, key: GenerationKey) -> KeptGeneration:
        kept = self.generations.get(key)
        if kept is None:
            raise ValueError(
                "That generation is no longer in memory (the app keeps the most recent ones): generate again."
            )
        return kept

    def _generated_run(self, model: str, key: GenerationKey) -> CachedRun:
        if key.model != model:
            raise ValueError("That generation was made with another model: generate again with this one.")
        with self.generation(key) as generation:
            run = generation.run
        run.eager_cache_bytes = EAGER_BYTES_PER_RUN
        return CachedRun(run)

"""What the app's workspace keeps, and what each holds in memory: a run with what the app derived from it
(`CachedRun`), a generation with the lock its steps take turns by (`KeptGeneration`, under a
`GenerationKey` of its own), and a model's weights and tokenizer (`model_nbytes`)."""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass, field

import numpy as np

from explorer.engine.generate import Generation
from explorer.engine.run import Run
from explorer.explorer import Explorer


@dataclass(eq=False)
class CachedRun:
    """A run, the prompt text it was keyed by, and what the app derived from it that is worth keeping
    (the overview's head profile)."""

    run: Run
    text: str | GenerationKey  # the prompt as the run read it (cut to the characters tokenized), or
    # the key of the generation whose sequence it is
    profile: dict[str, np.ndarray] | None = None  # {name: [L, H]}, filled when the Overview opens
    _fixed_bytes: int = field(init=False, default=0)

    def __post_init__(self):
        tokens = sys.getsizeof(self.run.tokens) + sum(sys.getsizeof(t) for t in self.run.tokens)
        ids = sys.getsizeof(self.run.ids) + sum(sys.getsizeof(i) for i in self.run.ids)
        self._fixed_bytes = sys.getsizeof(self.text) + tokens + ids

    def nbytes(self) -> int:
        """Tensors the run holds now, the profile, and its Python text."""
        profile = sum(a.nbytes for a in (self.profile or {}).values())
        return self.run.cache_nbytes() + profile + self._fixed_bytes


def model_nbytes(explorer: Explorer) -> int:
    """Its weights and buffers, the memory its tokenizer holds (estimated as it loaded), and the corrupted
    runs it keeps for circuits (`engine.exact_circuits.CorruptedRuns`, as many as it holds now)."""
    tensors = [*explorer.model.parameters(), *explorer.model.buffers()]
    weights = sum(t.numel() * t.element_size() for t in tensors)
    return weights + explorer.tokenizer_nbytes + explorer.corrupted_runs.nbytes


@dataclass(frozen=True)
class GenerationKey:
    """Names one generation in the workspace: the model it ran on (its canonical key) and a serial number."""

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


def holds(value, run: Run | None) -> bool:
    """Whether a kept entry holds `run` (a cached run, or a generation's sequence)."""
    return run is not None and isinstance(value, CachedRun) and value.run is run

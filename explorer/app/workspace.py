"""What the app keeps in memory, shared by every visitor and bounded by one budget: loaded models,
runs of (model, prompt) or, with heads ablated, of (model, prompt, ablation), and generations, least
recently used dropped first once everything together passes it.

- Keys are canonical: a local model by its resolved real path (`dir`, `dir/.` and a symlink to it are
  one model), a hub id in lower case (the hub ignores case), '' and the bundled model's label and path
  all the default model; a prompt by the text the run reads (cut before tokenizing), so a 50 MB paste
  keeps 32 KB.
- The budget (`explorer.app.budget`) counts models' weights and tokenizers, runs (layer inputs,
  cached eager layers, the overview's scores, ids and tokens) and the prompt text held in keys; dropping
  a model drops its runs and generations, which hold it.
- A generation is kept under a `GenerationKey` of its own, and its sequence's Run under (model, that
  key) beside the prompts' runs: no prompt is a GenerationKey, so a typed prompt never finds a
  generated run (whose ids need not be the prompt's tokenization of its text), and every view reads
  either alike. A generation grows as it steps, so the cache is trimmed after each step.
- Models load one at a time (`LOAD_WAIT_SECONDS` at most in line), once the policy allows the source;
  a model whose weights would not fit the budget is refused before a weight is read, and one that fits
  is counted from then on, older entries dropped to make room before its weights are read.
- An expensive reading's working memory (the flow graph's shares, a patching sweep's two traces) is
  reserved in the budget while it runs (`reserve`, `Budget.reserve`).
- Other parts of the app keep what they hold in the budget, under keys of their own (`keep`).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import torch

from explorer.app import remote
from explorer.app.budget import Budget
from explorer.app.kept import CachedRun, GenerationKey, KeptGeneration
from explorer.app.policy import UNREADABLE, Policy, normalised
from explorer.engine.edits import Knockout
from explorer.engine.generate import Generation, Step
from explorer.engine.interventions import Ablation
from explorer.engine.run import Run
from explorer.engine.tokens import char_budget
from explorer.errors import CheckpointError
from explorer.explorer import Explorer, load
from explorer.loading.checkpoints import BUNDLED_MODEL
from explorer.loading.weights import ModelSize

log = logging.getLogger(__name__)

EAGER_BYTES_PER_RUN = 128 << 20  # eager layers one run keeps (a layer of 64 MiB maps, and its projections)
LOAD_WAIT_SECONDS = 120.0  # how long a request waits for another model's load before it is told to retry


class Workspace:
    """The models and runs the app holds. A model is named by what a person picked or typed: '' (or
    None) for the default model, a choice's label, a local directory, a .gguf file or a hub id."""

    def __init__(
        self,
        default_model: str | Path | None = None,
        *,
        device: torch.device | str | None = None,
        policy: Policy | None = None,
        max_bytes: int | None = None,
    ):
        self.default_model = default_model
        self.device = device
        self.policy = policy or Policy.from_environment()
        # models by key; runs by (model key, text), (model key, text, ablation) or (model key, a
        # GenerationKey); generations by GenerationKey; what others keep under keys of their own
        self.budget = Budget(max_bytes or self.policy.memory_bytes)
        self._loading = threading.Lock()  # one model load at a time

    @property
    def max_bytes(self) -> int:
        return self.budget.max_bytes

    @max_bytes.setter
    def max_bytes(self, value: int) -> None:
        self.budget.max_bytes = value

    # --- names ---

    def source(self, model: str | None) -> str:
        """What `explorer.load` reads for a picker value: a choice's source, or the text typed."""
        return self.policy.source_of(model)

    def key(self, model: str | None) -> str:
        """The canonical name of a model, the same however it is spelled (see the module's notes)."""
        source = self.source(model)
        if source == "":
            default = self.default_model or BUNDLED_MODEL
            return self._local_key(default) or str(default)
        local = self._local_key(source)
        return local if local is not None else normalised(source)

    def _local_key(self, source: str | Path) -> str | None:
        try:
            path = Path(source).expanduser()
            return os.path.realpath(path) if path.exists() else None
        except (OSError, RuntimeError, ValueError):  # too long, unreadable, an unknown ~user, a NUL
            return None

    # --- models ---

    def is_loaded(self, model: str | None) -> bool:
        """Whether the model is in memory (so picking it costs no load); refused sources are not."""
        source = self.source(model)
        try:
            self.policy.check(source)
        except CheckpointError:
            return False
        return self.key(source) in self.budget

    def explorer(self, model: str | None, progress=None, load: bool = True) -> Explorer:
        """The loaded model, loading it first if needed (telling `progress(fraction, message)` each
        stage); raises CheckpointError, with the policy's message for a source it refuses. With
        `load=False` only the default model is loaded if missing: another one must be loaded again
        by whoever loads models (the app's Load button, which counts loads per visitor)."""
        source = self.source(model)
        self.policy.check(source)
        key = self.key(source)
        found = self.budget.touch(key)
        if found is not None:
            return found
        if not load and source != "":
            raise CheckpointError(
                "That model is no longer in memory (the app made room for others): load it again."
            )
        if not self._loading.acquire(timeout=LOAD_WAIT_SECONDS):
            raise CheckpointError("Another model is loading and the wait ran long; try again in a minute.")
        try:
            found = self.budget.touch(key)  # loaded by the request this one waited for
            if found is not None:
                return found
            explorer = self._load(source, progress)
            self.budget.insert({key: explorer})
            return explorer
        finally:
            self._loading.release()

    def _load(self, source: str, progress) -> Explorer:
        serial = self.budget.serial()

        def make_room(size: ModelSize) -> None:
            """A model past the budget refused; else its size counted while it loads, older entries
            dropped first (a model being loaded does not sit beside a full cache)."""
            size.refuse_past(self.max_bytes)
            self.budget.make_room(serial, size.nbytes, keep=set(), what="the model")

        try:
            hub_id = remote.model_of(source)  # a model NDIF runs (the policy checked it is offered)
            if hub_id is not None:
                explorer = load(hub_id, self.device, progress, fits=make_room, backend="nnsight", remote=True)
            else:
                explorer = load(source or self.default_model, self.device, progress, fits=make_room)
        except CheckpointError as error:
            if self.policy.public:
                # One message whatever failed, a typed source or a listed one: whether it names a file,
                # a folder or nothing, whether the hub answered or the cache held it would tell a
                # visitor what the server holds and reaches. The reason goes to the operator's log.
                log.warning("loading %r failed: %s", source[:200], error)
                raise CheckpointError(UNREADABLE) from None
            raise
        finally:
            self.budget.release(serial)
        # A model found on this machine is named as the picker names it ("qwen3:0.6b (Ollama)"), not by
        # its file (an Ollama blob is "sha256-…") or its snapshot folder.
        local = {found: label for label, found in self.policy.local_choices()}
        explorer.name = local.get(source, explorer.name)
        return explorer

    # --- runs ---

    def cached_run(
        self, model: str | None, text: str | GenerationKey, ablation: Ablation | Knockout | None = None
    ) -> CachedRun:
        """The run of `text` on `model`: one fast forward the first time, none after (raises PromptError).
        The model must be in memory, unless it is the default one (see `explorer`). With an `ablation`
        (heads zeroed or mean-replaced) or a `Knockout` (attention cells blocked), a run of its own, kept
        beside the plain one. For a GenerationKey, the generated sequence's run (no forward)."""
        explorer = self.explorer(model, load=False)
        key = self.key(model)
        if isinstance(text, GenerationKey):
            return self._generated_run(explorer, key, text)
        run_key, read = self._run_key(explorer, key, text, ablation)
        found = self.budget.touch(key, run_key)
        if found is not None:
            return found
        run = explorer.run(
            text, max_tokens=self.policy.max_tokens, **(ablation.run_options() if ablation else {})
        )
        run.eager_cache_bytes = EAGER_BYTES_PER_RUN
        return self.budget.insert({key: explorer, run_key: CachedRun(run, read)})

    def _run_key(
        self, explorer: Explorer, key: str, text: str, ablation: Ablation | Knockout | None
    ) -> tuple:
        """The key a run of `text` is kept under, and the text it reads (cut to what a run may take)."""
        limit = min(self.policy.max_tokens, explorer.config.context_length)
        read = text[: char_budget(limit)] if isinstance(text, str) else text
        return ((key, read) if ablation is None else (key, read, ablation)), read

    def run(self, model: str | None, text: str, ablation: Ablation | Knockout | None = None) -> Run:
        return self.cached_run(model, text, ablation).run

    def held_run(
        self, model: str | None, text: str | GenerationKey, ablation: Ablation | Knockout | None = None
    ) -> Run | None:
        """The run of `text` on `model` (with `ablation`, as `run` takes it) where the workspace holds
        it, else None: nothing is loaded or run (what is made ready ahead of a person's next step never
        costs a forward)."""
        key = self.key(model)
        explorer = self.budget.touch(key)
        if explorer is None:
            return None
        generated = isinstance(text, GenerationKey)
        run_key = (key, text) if generated else self._run_key(explorer, key, text, ablation)[0]
        found = self.budget.touch(key, run_key)
        return None if found is None else found.run

    def _generated_run(self, explorer: Explorer, key: str, generated: GenerationKey) -> CachedRun:
        if generated.model != key:
            raise ValueError("That generation was made with another model: generate again with this one.")
        found = self.budget.touch(key, (key, generated))
        if found is not None:
            return found
        with self.generation(generated) as generation:
            run = generation.run
        run.eager_cache_bytes = EAGER_BYTES_PER_RUN
        return self.budget.insert({key: explorer, (key, generated): CachedRun(run, generated)})

    # --- generations ---

    def generate(self, model: str | None, prompt: str, **settings) -> GenerationKey:
        """A new generation of `prompt` on `model` (`settings` as `Explorer.generate` takes them, checked
        here: raises PromptError or ValueError), kept under a key of its own; `steps(key)` takes its
        steps. Nothing runs the model until the first step. The prompt and the new tokens together
        stay within the tokens a run may have (`Policy.max_tokens`)."""
        explorer = self.explorer(model, load=False)
        generation = explorer.generate(prompt, **settings, max_tokens=self.policy.max_tokens)
        key = GenerationKey(self.key(model), self.budget.serial())
        self.budget.insert({key.model: explorer, key: KeptGeneration(generation)})
        return key

    def steps(self, key: GenerationKey) -> Iterator[Step]:
        """The generation's steps as it takes them, each taken holding its lock (not while the caller
        holds the step), the cache trimmed after each (the generation grows): closing this iterator
        stops the generation after the step being taken."""
        kept = self._kept(key)
        steps = iter(kept.generation)
        while True:
            with kept.lock:
                step = next(steps, None)
            if step is None:
                return
            self.budget.insert({key.model: kept.generation.explorer, key: kept})  # it grew: trim around it
            yield step

    @contextmanager
    def generation(self, key: GenerationKey) -> Iterator[Generation]:
        """The kept generation, read while no step is being taken (raises ValueError once it is dropped)."""
        kept = self._kept(key)
        with kept.lock:
            yield kept.generation

    def _kept(self, key: GenerationKey) -> KeptGeneration:
        kept = self.budget.touch(key.model, key) if isinstance(key, GenerationKey) else None
        if kept is None:
            raise ValueError(
                "That generation is no longer in memory (the app keeps the most recent ones): generate again."
            )
        return kept

    # --- what others keep ---

    def keep(self, key, value) -> None:
        """`value` (with an `nbytes()`) kept under a key of its own kind, in the budget as a run is."""
        self.budget.insert({key: value})

    def kept(self, key):
        """What `keep` kept under `key`, marked most recently used; None once dropped."""
        return self.budget.touch(key)

    def forget(self, which: Callable[[object], bool]) -> None:
        """What `keep` kept under the keys `which` picks, dropped (never a model or a run)."""
        self.budget.forget(which)

    # --- the budget ---

    def reserve(self, nbytes: int, what: str, run: Run | None = None):
        """`nbytes` of working memory counted in the budget while the block inside runs
        (`Budget.reserve`): never dropping `run` and its model, which the reading reads."""
        return self.budget.reserve(nbytes, what, run)

    def nbytes(self) -> int:
        """Everything held: models, runs (and the text of their keys) and generations, and the working
        memory reserved by readings running now."""
        return self.budget.nbytes()

    def __contains__(self, key: str | tuple | GenerationKey) -> bool:
        return key in self.budget

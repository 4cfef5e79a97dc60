"""What a request may cost on this server, checked before the work starts and held while it runs.

- Every request is bounded in time (`Policy.request_seconds`, on a Space 60 s): `bounded` wraps each
  handler, and the engine's loops stop at the bound with a message saying so (`engine.deadline`).
- An expensive reading (the flow graph, the lens, the Overview's head scores, a patching sweep, a
  circuit, an ablated run, a score's sources, the composition of every pair of heads) has a cost
  model (`Cost`, from its tokens, layers, heads, vocabulary): its working memory is reserved in the
  workspace's budget while it runs (`Workspace.reserve`), so the process stays near the budget however
  many visitors ask at once; a visitor computes one at a time (`Readings`), and the events that compute
  them take turns in one queue of their own (`COSTLY`, the layout's concurrency). Each is one of its
  page's jobs (`explorer.app.jobs`): its progress shown with the time left, and ended by the page's Stop.
- A circuit whose time would pass the bound is refused before it starts (`circuit_time`), its time
  estimated from forwards timed on this server, steady however busy the machine is (`ForwardTimes`).
- The flow graph's cost grows steeply as its threshold falls at long prompts; on a bounded server the
  threshold has a floor that rises with the prompt's length (`flow_threshold`), and the graph is drawn
  there, the status saying so.
"""

from __future__ import annotations

import functools
import inspect
import math
import statistics
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass

import torch

from explorer.app import visitors
from explorer.app.jobs import Jobs
from explorer.app.policy import Policy
from explorer.app.workspace import Workspace
from explorer.engine import deadline, working_memory
from explorer.engine.composition import BAND_ROWS
from explorer.engine.config import ModelConfig
from explorer.engine.run import Run
from explorer.errors import LimitError

FLOW_FLOOR = 0.01  # the flow threshold's floor up to FLOW_FLOOR_TOKENS; it grows with the prompt past them
FLOW_FLOOR_TOKENS = 256
TILE_BYTES = 64 << 20  # what a reading holds besides its named tensors (blocks of rows, tiles of the vocab)


@dataclass(frozen=True)
class Cost:
    """What one expensive reading asks of the server, known before it starts."""

    what: str  # the reading, as messages name it ("the flow graph at 2,048 tokens")
    nbytes: int  # its working memory while it runs
    instead: str = "use a shorter prompt"  # what to ask for instead when it is stopped


def flow_cost(run: Run, threshold: float) -> Cost:
    """The flow graph: what it holds grows with the positions it reaches, which the engine tells before
    each layer (`engine.working_memory`), up to six [H, N, N] tensors when every position is reached."""
    return Cost(
        f"the flow graph at {run.n_tokens:,} tokens (threshold {threshold:g})",
        0,
        "raise the threshold, or use a shorter prompt",
    )


def lens_cost(run: Run) -> Cost:
    """The lens and attribution: the lens' tiles of the vocabulary, and a token's rank line, which
    holds every layer's logits at its position and their softmax ([L+1, vocab] twice)."""
    c = run.config
    rank_line = 2 * 4 * (c.n_layers + 1) * c.vocab_size
    return Cost(f"the lens at {run.n_tokens:,} tokens", rank_line + TILE_BYTES)


def overview_cost(run: Run) -> Cost:
    """The Overview's head scores: one layer's q, k, v and a block of softmax rows at a time."""
    c, n = run.config, run.n_tokens
    projections = 4 * n * c.head_dim * (3 * c.n_heads + 3 * c.n_kv_heads)
    return Cost(f"the Overview's head scores at {n:,} tokens", projections + TILE_BYTES)


def why_cost(run: Run) -> Cost:
    """A score's sources and its row's key drivers: every earlier layer's heads rerun over the positions
    up to the query, one layer at a time (its q, k, v, every head's output, the key side read at every
    key), and a block of rows."""
    c, n = run.config, run.n_tokens
    layer = 4 * n * (4 * c.hidden_size + 3 * c.n_heads * c.head_dim)
    return Cost(f"a score's sources at {n:,} tokens", layer + TILE_BYTES)


def steering_cost(config: ModelConfig, new_tokens: int) -> Cost:
    """Steering beside its baseline: three short generations and their forwards, each holding the
    softmax of the vocabulary at every new position ([new tokens, vocab] twice), and a block of rows."""
    return Cost("steering and its baseline", 2 * 4 * new_tokens * config.vocab_size + TILE_BYTES)


def composition_cost(explorer) -> Cost:
    """The composition of every pair of heads, from the weights (kept once computed): every head's
    Grams as two hidden × d factors on each side, one band of their rows, the pairs' sums."""
    c = explorer.config
    heads = c.n_layers * c.n_heads
    if explorer.composition_computed:
        return Cost("the composition of every pair of heads", 0)
    factors = 4 * 8 * heads * c.hidden_size * c.head_dim
    bands = 4 * 4 * heads * BAND_ROWS * c.hidden_size
    return Cost(f"the composition of every pair of {heads:,} heads", factors + bands + 8 * 3 * heads**2)


def patching_cost(config: ModelConfig, n_tokens: int) -> Cost:
    """A patching sweep of prompts of up to `n_tokens`: the clean and corrupted runs' traces (each
    layer's input and every head's output) and the patched block's work. It reads one logit difference
    through one direction of the LM head, never a row of the vocabulary."""
    c, n = config, n_tokens
    traces = 2 * 4 * c.n_layers * n * (c.hidden_size + c.n_heads * c.head_dim)
    return Cost(f"the patching sweep (prompts of up to {n:,} tokens)", traces + TILE_BYTES)


def circuit_cost(config: ModelConfig, n_pairs: int, n_tokens: int, methods, positions=None) -> Cost:
    """A circuit reading of `n_pairs` pairs of up to `n_tokens`: the methods run one after another, each
    freeing what it held, so its working memory is the largest of theirs (`circuit_memory`)."""
    held = circuit_memory(config, n_pairs, n_tokens, methods, positions)
    where = "" if positions is None else f", each head at {len(positions)} position"
    where += "s" * (positions is not None and len(positions) != 1)
    return Cost(
        f"the circuit of {n_pairs} pairs of up to {n_tokens:,} tokens{where}",
        max(held.values()) + TILE_BYTES,
        "use fewer or shorter pairs",
    )


def circuit_memory(config: ModelConfig, n_pairs: int, n_tokens: int, methods, positions=None) -> dict:
    """The bytes each of a circuit reading's methods holds at its peak (and the faithfulness curve's),
    all pairs at once (a batch of pairs of one length is the most any method holds):
      a trace     a run's recorded stream, MLP and attention writes and every head's q, k, v and output
      a backward  what autograd keeps of a forward (norms, projections, the MLP's hidden rows, the
                  attention weights) and its zero leaves with their gradients
      exact       two traces, the node sweep's batch (a row per head, one start at a time) and scores
      atp         two traces and a backward
      eap         two traces, every writer's write and its difference (two [U, B, N, hidden]), each
                  reader's input gradient summed over the steps ([L, B, readers, N, hidden]), a backward
      curve       every writer's change in one circuit's forward, the corrupted run's writes
      graph       EAP-IG's, with every positional edge's score and the graph made of them."""
    c, tokens = config, 4 * n_pairs * n_tokens  # bytes of one float32 per pair and position
    head_rows = c.head_dim * (2 * c.n_heads + 2 * c.n_kv_heads)
    trace = tokens * c.n_layers * (3 * c.hidden_size + head_rows)
    autograd = 6 * c.hidden_size + 4 * c.intermediate_size + c.n_heads * n_tokens + 2 * head_rows
    backward = tokens * c.n_layers * (autograd + 2 * c.hidden_size)
    writers = 1 + c.n_layers * (c.n_heads + 1)
    readers = c.n_heads + 2 * c.n_kv_heads + 1
    heads, at = c.n_layers * c.n_heads, 1 if positions is None else len(positions)
    held = {
        "exact": 2 * trace + 3 * 4 * heads * n_tokens * c.hidden_size + 2 * 4 * heads * at,
        "atp": 2 * trace + backward,
        "eap": 2 * trace + tokens * c.hidden_size * (2 * writers + c.n_layers * readers) + backward,
        "curve": tokens * c.hidden_size * (writers + 3 * c.n_layers),
    }
    # EAP-IG's, and every positional edge's score [U, V, N] with its graph (writer, reader and position
    # as int64 and the score: 28 bytes an edge, half the [U, V] grid valid), pruned in a few such arrays
    scores = 4 * writers * (c.n_layers * readers + 1) * n_tokens
    held["graph"] = held["eap"] + scores + 4 * scores
    return {method: held[method] for method in [*methods, "curve"] if method in held}


# A circuit reading's work in forwards of one prompt, per pair (bench/circuits-cpu.md, SmolLM2 on CPU):
ATP_FORWARDS = 3.5  # a clean forward, a corrupted forward and its backward
EAP_STEP_FORWARDS = 0.8  # a forward and backward of the batch, per step (2 traced forwards besides)
SWEEP_ROW_FORWARDS = 0.4  # one patched row through one layer, batched, against a layer of one forward
CURVE_FORWARDS = 1.5  # one circuit's forward (the corrupted run recorded once besides)
CURVE_POINTS = 8  # the faithfulness curve's circuits (views.circuits.CURVE_SHARES); 2 without EAP-IG


def circuit_forwards(
    config: ModelConfig, batches, methods, positions=None, steps: int = 5
) -> dict[str, float]:
    """A circuit reading's work, in forwards of one prompt of the longest length, per method (and the
    curve, measured whatever the methods). `batches`: (pairs, tokens, first difference) of each batch;
    `positions` from the end, or None (every position at once)."""
    heads, per_row = config.n_heads, (config.n_layers + 1) / 2  # a start's rows: every head, growing
    work = dict.fromkeys([*methods, "curve"], 0.0)
    for size, n, first in batches:
        first = min(first, n - 1)
        starts = [first] if positions is None else [max(first, n + p) for p in positions]
        if "exact" in work:
            sweep = SWEEP_ROW_FORWARDS * heads * per_row * sum((n - s) / n for s in starts)
            work["exact"] += size * (2 + sweep)
        if "atp" in work:
            work["atp"] += size * ATP_FORWARDS
        if "eap" in work:
            work["eap"] += size * (2 + EAP_STEP_FORWARDS * steps)
        if "graph" in work:  # EAP-IG of the largest batch, and one run of the first clean prompt
            work["graph"] = max(work["graph"], size * (2 + EAP_STEP_FORWARDS * steps) + 1)
        work["curve"] += size * (1 + CURVE_FORWARDS * (CURVE_POINTS if "eap" in methods else 2))
    return work


def circuit_work(config: ModelConfig, data, methods, positions=None, steps: int = 5) -> dict[str, float]:
    """`circuit_forwards` of the batches of `data` (`engine.pairs.Dataset`): each method's share of a
    circuit reading's work, which its progress follows (`views.circuits.find`)."""
    shapes = [(batch.size, batch.n_tokens, batch.first_difference) for batch in data.batches]
    return circuit_forwards(config, shapes, methods, positions, steps)


FORWARD_TIMINGS = 5  # forwards timed each time (after one to warm up): their median is one measure
LENGTH_CLASS = 16  # a prompt is timed at its length rounded up to a multiple of this many tokens


class ForwardTimes:
    """The seconds one forward takes on this server, per model and prompt length class: the median of
    `FORWARD_TIMINGS` forwards after one to warm up, measured each time it is asked for, the lowest
    such median kept while the model is. What else the machine does (a first call's allocations,
    another visitor's request holding a core) only ever slows a forward, and one forward timed alone
    swings with it; the lowest median is what the model costs here, and it never rises, so the pairs
    a refusal says would fit are taken when asked for."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter, timings: int = FORWARD_TIMINGS):
        self.clock, self.timings = clock, timings
        self._kept: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # explorer -> {tokens: s}
        self._lock = threading.Lock()

    def seconds(self, explorer, ids) -> float:
        """One forward of a prompt as long as `ids` ([1, N]) on `explorer`'s model."""
        n = ids.shape[1]
        length = min(math.ceil(n / LENGTH_CLASS) * LENGTH_CLASS, max(n, explorer.config.context_length))
        measured = self._measure(explorer, ids.repeat(1, math.ceil(length / n))[:, :length])
        with self._lock:
            kept = self._kept.setdefault(explorer, {})
            kept[length] = min(kept.get(length, math.inf), measured)
            return kept[length]

    def _measure(self, explorer, ids) -> float:
        sync = torch.cuda.synchronize if ids.is_cuda else lambda: None  # a GPU's forward ends when it syncs
        times = []
        with torch.no_grad():
            for timed in range(self.timings + 1):
                start = self.clock()
                explorer.model.hidden_states(ids)
                sync()
                if timed:  # the first warms it
                    times.append(self.clock() - start)
        return statistics.median(times)


FORWARD_TIMES = ForwardTimes()  # the server's, for every circuit asked for


def circuit_time(
    explorer, data, methods, positions, seconds: float, names: dict, steps: int = 5, times=FORWARD_TIMES
) -> None:
    """Refuse, before it starts, a circuit reading on `data` (`engine.pairs.Dataset`) whose work
    (`circuit_forwards`), at the seconds one forward of its longest prompt takes on this server
    (`times`), would pass the request bound `seconds` (0: none): the message says the most pairs that
    fit and the costliest method. `names`: method -> its name in the tab."""
    if not seconds:
        return
    work = circuit_work(explorer.config, data, methods, positions, steps)
    ids = max(data.batches, key=lambda batch: batch.n_tokens).clean[:1]  # [1, N]
    total = sum(work.values()) * times.seconds(explorer, ids)
    if total > seconds:
        raise LimitError(too_long(work, total, data.size, seconds, names, positions is not None))


def too_long(work: dict[str, float], total: float, n_pairs: int, seconds: float, names, positions) -> str:
    """Why a circuit reading of about `total` seconds is refused, and what would fit."""
    fits = int(n_pairs * 0.8 * seconds / total)  # a fifth kept for what the estimate misses
    parts = ", ".join(
        f"{names.get(m, 'the faithfulness curve')} {share / sum(work.values()):.0%}"
        for m, share in work.items()
    )
    advice = [f"ask for at most {fits} pair{'s' * (fits != 1)}"] if fits else []
    methods = [m for m in work if m != "curve"]
    if len(methods) > 1:
        advice.append(f"untick {names[max(methods, key=work.get)]}")
    if positions:
        advice.append("patch the heads at fewer positions")
    advice = advice or ["use shorter pairs"]
    return (
        f"This circuit would take about {total:.0f} s on this server ({parts} of it), past its "
        f"{seconds:g} s bound on a request: {', or '.join(advice)}."
    )


def flow_threshold(threshold: float, n_tokens: int, policy: Policy) -> tuple[float, str]:
    """The threshold the flow graph is drawn at, and why it is not the one asked for ('' when it is): on
    a server bounding each request's time, at least FLOW_FLOOR × tokens / FLOW_FLOOR_TOKENS."""
    if not policy.request_seconds:
        return threshold, ""
    floor = round(FLOW_FLOOR * max(1.0, n_tokens / FLOW_FLOOR_TOKENS), 2)
    if threshold >= floor:
        return threshold, ""
    return floor, (
        f"The flow graph is drawn at threshold {floor:g}, the lowest this app computes at {n_tokens:,} "
        f"tokens (each request is bounded to {policy.request_seconds:g} s; below it, routes multiply): "
        f"{threshold:g} needs a shorter prompt."
    )


class Readings:
    """Expensive readings under way: one per visitor (address) at a time, each with its working memory
    reserved in the workspace's budget and its own wording of the time bound; each one of its page's
    `jobs` (followed, and ended by its Stop), where given."""

    def __init__(self, workspace: Workspace, jobs: Jobs | None = None):
        self.workspace, self.jobs = workspace, jobs
        self._running: dict[str, str] = {}  # what each visitor is computing
        self._lock = threading.Lock()

    @contextmanager
    def reading(self, request, cost: Cost, run: Run | None = None) -> Iterator[None]:
        policy = self.workspace.policy
        asking = visitors.visitor(request, policy.proxies)  # its address, and its page's session
        visitor = asking.address
        with self._lock:
            if visitor in self._running:
                running = self._running[visitor]
                raise LimitError(
                    f"{running[:1].upper()}{running[1:]} that you asked for is still being computed, and "
                    "this app computes one expensive reading per visitor at a time: ask for "
                    f"{cost.what} once it is drawn."
                )
            self._running[visitor] = cost.what
        try:
            with (
                self.workspace.reserve(cost.nbytes, cost.what, run) as resize,
                working_memory.metered(resize),
                deadline.bounded(policy.request_seconds, cost.what, cost.instead),
                self.jobs.running(asking.session, cost.what) if self.jobs else nullcontext(),
            ):
                yield
        finally:
            with self._lock:
                del self._running[visitor]


def bounded(fn: Callable, seconds: float) -> Callable:
    """`fn`, a Gradio handler, stopped by the engine once it has computed `seconds` (0: as it is). A
    stream's steps share one bound, from its start."""
    if not seconds:
        return fn
    what, instead = "this request", "ask for less (a shorter prompt), or try again"
    if inspect.isgeneratorfunction(fn):

        @functools.wraps(fn)
        def stream(*args, **kwargs):
            end, steps = time.monotonic() + seconds, fn(*args, **kwargs)
            while True:
                with deadline.until(end, seconds, what, instead):
                    update = next(steps, _DONE)
                if update is _DONE:
                    return
                yield update

        return stream

    @functools.wraps(fn)
    def call(*args, **kwargs):
        with deadline.bounded(seconds, what, instead):
            return fn(*args, **kwargs)

    return call


_DONE = object()

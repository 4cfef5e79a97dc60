"""What one request may cost: bounded in time (the engine's loops stop at the bound and say so), its
working memory counted in the workspace's budget while it runs, one expensive reading per visitor at a
time, the flow graph's threshold floored at long prompts on a bounded server, and a circuit's time
estimated steadily however busy the machine."""

from __future__ import annotations

import html
import itertools
import re
import threading
import time
import types

import pytest
import torch

import explorer
from explorer.app import limits
from explorer.app.policy import Policy
from explorer.app.workspace import Workspace
from explorer.engine import deadline, flow, working_memory
from explorer.errors import LimitError
from explorer.tools.stress_client import App, status_of
from tests.conftest import PROMPT, served

UNLIMITED_LOADS = dict(loads_per_minute=10_000, server_loads_per_minute=10_000)


@pytest.fixture(scope="module")
def run(gqa_checkpoint):
    return explorer.load(gqa_checkpoint, device="cpu").run(PROMPT)


def request_from(address: str):
    """What a handler reads of a gr.Request: its headers and its client's host."""
    return types.SimpleNamespace(headers={}, client=types.SimpleNamespace(host=address))


# --- time ---


def test_a_reading_past_its_bound_stops_between_steps_and_names_itself(run):
    with pytest.raises(LimitError) as error, deadline.bounded(1e-9, "the flow graph", "raise the threshold"):
        run.information_flow(threshold=0.01)
    assert str(error.value) == (
        "The flow graph was stopped after 1e-09 s, this app's limit for one request "
        "(EXPLORER_REQUEST_SECONDS): raise the threshold."
    )
    run.information_flow(threshold=0.2)  # the bound ends with its block


def test_an_inner_bound_names_its_work_but_cannot_outlast_the_requests():
    with deadline.bounded(0.05, "this request"), deadline.bounded(60, "the lens"):
        time.sleep(0.06)
        with pytest.raises(LimitError, match=r"^The lens was stopped after 0.05 s"):
            deadline.check()
    deadline.check()  # no bound outside


def test_a_streams_steps_share_one_bound_from_its_start(monkeypatch):
    now = [0.0]  # a clock each step moves by 0.04 s, so what the bound stops is the same on any machine
    clock = types.SimpleNamespace(monotonic=lambda: now[0])
    monkeypatch.setattr(deadline, "time", clock)
    monkeypatch.setattr(limits, "time", clock)

    def steps():
        for step in range(10):
            deadline.check()
            now[0] += 0.04
            yield step

    done = []
    with pytest.raises(LimitError, match="^This request was stopped after 0.1 s"):
        done.extend(limits.bounded(steps, 0.1)())
    assert done == [0, 1, 2]  # the fourth step starts at 0.12 s of the stream's, not of its own


def test_a_served_reading_stops_at_the_servers_bound_and_says_so(gqa_checkpoint, monkeypatch):
    """A flow graph at 2,048 tokens ran for 514 s; on a bounded server it stops at the bound."""
    real = flow._attention_shares

    def slow(*args, **kwargs):  # each layer's shares take 0.4 s: the graph passes a bound of 0.5 s
        time.sleep(0.4)
        return real(*args, **kwargs)

    monkeypatch.setattr(flow, "_attention_shares", slow)
    policy = Policy(request_seconds=0.5, **UNLIMITED_LOADS)
    with served(Workspace(gqa_checkpoint, device="cpu", policy=policy)) as url:
        app = App(url, timeout=60)
        assert app.call("run", [PROMPT, 0, 0], session="bounded")[0]
        ok, outputs = app.call("flow_at", [0.01, 1], session="bounded")
        status = html.unescape(status_of(outputs))
        assert ok and status.startswith("The flow graph at "), outputs
        assert "was stopped after 0.5 s, this app's limit for one request" in status


# --- memory ---


def test_a_readings_working_memory_is_counted_while_it_runs_and_older_runs_make_room(gqa_checkpoint):
    workspace = Workspace(gqa_checkpoint, device="cpu", policy=Policy(**UNLIMITED_LOADS))
    model = (workspace.explorer(""), workspace.nbytes())[1]
    workspace.run("", "An older prompt, kept")
    older = workspace.nbytes() - model
    new = workspace.run("", PROMPT)
    held = workspace.nbytes()
    workspace.max_bytes = held
    with workspace.reserve(older // 2, "the flow graph", new):
        assert ("", "An older prompt, kept") not in workspace  # dropped for it, least recently used
        assert workspace.nbytes() <= workspace.max_bytes
        assert workspace.run("", PROMPT) is new
    assert workspace.nbytes() < held  # the reservation ends with the reading


def test_a_reading_that_cannot_fit_beside_its_model_and_run_is_refused_before_it_starts(gqa_checkpoint):
    workspace = Workspace(gqa_checkpoint, device="cpu", policy=Policy(**UNLIMITED_LOADS))
    run = workspace.run("", PROMPT)
    workspace.max_bytes = workspace.nbytes() + 1000
    with pytest.raises(LimitError) as error, workspace.reserve(10**9, "the flow graph at 32 tokens", run):
        pytest.fail("the reading started")
    assert str(error.value).startswith("The flow graph at 32 tokens needs about 1.00 GB of working memory")
    assert "(EXPLORER_MEMORY_GB)" in str(error.value)
    assert workspace.run("", PROMPT) is run  # what it reads stays


def test_the_lens_and_patching_are_charged_what_they_hold_never_logits_at_every_position():
    """Neither holds [N, vocab] (2 GiB for Gemma 3 at 2,048 tokens): the lens reads the vocabulary a
    tile at a time and a rank line of [L+1, vocab]; a patching sweep reads one direction of the LM head."""
    gemma = explorer.ModelConfig(
        vocab_size=262_144,
        hidden_size=640,
        n_layers=18,
        n_heads=4,
        n_kv_heads=1,
        head_dim=256,
        intermediate_size=2048,
    )
    short, long = (types.SimpleNamespace(config=gemma, n_tokens=n) for n in (16, 2048))
    assert limits.lens_cost(short).nbytes == limits.lens_cost(long).nbytes
    assert limits.lens_cost(long).nbytes == 2 * 4 * 19 * 262_144 + limits.TILE_BYTES  # 102 MiB
    small_vocabulary = explorer.ModelConfig(**{**vars(gemma), "vocab_size": 1000})
    assert limits.patching_cost(gemma, 128).nbytes == limits.patching_cost(small_vocabulary, 128).nbytes


def test_the_flow_graph_tells_its_working_memory_layer_by_layer(run):
    """Its size is known only as it reaches positions: six [Q, H, keys] tensors a layer at most."""
    told = []
    with working_memory.metered(told.append):
        run.information_flow(threshold=0.01)
    c, n = run.config, run.n_tokens
    widest = 4 * (6 * c.n_heads * n * n + c.n_heads * n * c.hidden_size + 4 * n * c.hidden_size)
    assert 0 < len(told) <= c.n_layers and max(told) <= widest + flow.DISTANCE_BLOCK_BYTES


def test_a_flow_graph_that_outgrows_the_budget_is_stopped_naming_its_need(gqa_checkpoint):
    workspace = Workspace(gqa_checkpoint, device="cpu", policy=Policy(**UNLIMITED_LOADS))
    run = workspace.run("", PROMPT)
    workspace.max_bytes = workspace.nbytes() + (1 << 20)  # less than one layer's shares need
    readings = limits.Readings(workspace)
    with (
        pytest.raises(
            LimitError, match=r"^The flow graph at 52 tokens \(threshold 0.01\) needs about 0.03 GB"
        ),
        readings.reading(request_from("10.0.0.1"), limits.flow_cost(run, 0.01), run),
    ):
        run.information_flow(threshold=0.01)
    assert workspace.nbytes() <= workspace.max_bytes - (1 << 20)  # nothing reserved after


# --- who computes what ---


def test_a_visitor_computes_one_expensive_reading_at_a_time(gqa_checkpoint):
    workspace = Workspace(gqa_checkpoint, device="cpu", policy=Policy(**UNLIMITED_LOADS))
    readings = limits.Readings(workspace)
    inside, leave = threading.Event(), threading.Event()

    def first():
        with readings.reading(request_from("10.0.0.1"), limits.Cost("the flow graph", 0)):
            inside.set()
            leave.wait(10)

    worker = threading.Thread(target=first)
    worker.start()
    inside.wait(10)
    try:
        with (
            pytest.raises(LimitError, match="^The flow graph that you asked for is still being computed"),
            readings.reading(request_from("10.0.0.1"), limits.Cost("the lens", 0)),
        ):
            pass
        with readings.reading(request_from("10.0.0.2"), limits.Cost("the lens", 0)):
            pass  # another visitor's
    finally:
        leave.set()
        worker.join()
    with readings.reading(request_from("10.0.0.1"), limits.Cost("the lens", 0)):
        pass


@pytest.mark.parametrize(
    "seconds, tokens, asked, drawn",
    [(60, 2048, 0.01, 0.08), (60, 1024, 0.04, 0.04), (60, 200, 0.01, 0.01), (0, 2048, 0.01, 0.01)],
)
def test_the_flow_threshold_has_a_floor_that_rises_with_the_prompt_on_a_bounded_server(
    seconds, tokens, asked, drawn
):
    threshold, note = limits.flow_threshold(asked, tokens, Policy(request_seconds=seconds))
    assert threshold == drawn
    assert bool(note) == (drawn != asked)
    if note:
        assert note.startswith(f"The flow graph is drawn at threshold {drawn:g}, the lowest this app")


def test_engine_loops_stop_at_the_bound_before_their_next_layer(run):
    """Every block of the one forward, every layer's projections and every block of softmax rows check it."""
    for reading in (
        lambda: run.explorer.run("To be, or not"),
        lambda: run.rollout(),
        lambda: run.attention_to(0),
        lambda: run.logit_lens(),
    ):
        with pytest.raises(LimitError), deadline.bounded(1e-9, "this request"):
            reading()
    assert torch.isfinite(run.rollout()).all()


# --- a circuit's time ---

SMOLLM2 = types.SimpleNamespace(
    n_layers=30, n_heads=9, n_kv_heads=3, hidden_size=576, head_dim=64, context_length=8192
)
BUSY = (1, 30, 1, 1, 4, 1, 12, 1, 1, 2, 1, 8)  # how many times slower the machine makes each forward, in turn


class BusyModel:
    """A model whose forward takes `seconds` per 16 tokens on a clock of its own, times what else the
    machine does at that moment (`BUSY`, in turn)."""

    def __init__(self, seconds: float):
        self.seconds, self.now, self.slowdowns = seconds, 0.0, itertools.cycle(BUSY)

    def hidden_states(self, ids):
        self.now += self.seconds * ids.shape[1] / 16 * next(self.slowdowns)


class TimedExplorer:
    def __init__(self, seconds: float):
        self.config, self.model = SMOLLM2, BusyModel(seconds)


def ioi_pairs(count: int, tokens: int = 18):
    """A dataset of `count` pairs of `tokens` tokens, as `engine.pairs.dataset` gives it."""
    batch = types.SimpleNamespace(
        size=count, n_tokens=tokens, first_difference=9, clean=torch.zeros(count, tokens)
    )
    return types.SimpleNamespace(batches=[batch], size=count)


def test_the_circuit_estimate_is_steady_while_single_forwards_swing_thirtyfold():
    """Timed from one forward, 16 pairs were "about 72 s: ask for at most 10 pairs" and then 10 pairs
    "about 279 s". From the lowest median of several forwards, the estimate stays within a fifth of
    itself however busy the machine is as it is asked, and never rises."""
    explorer = TimedExplorer(0.05)
    times = limits.ForwardTimes(clock=lambda: explorer.model.now)
    ids = torch.zeros(1, 18, dtype=torch.long)
    estimates = [times.seconds(explorer, ids) for _ in range(24)]
    assert max(estimates) <= 1.2 * min(estimates)
    assert estimates == sorted(estimates, reverse=True)
    assert min(estimates) == pytest.approx(0.05 * 32 / 16)  # 18 tokens timed as 32: never less


def test_a_circuit_refused_says_how_many_pairs_fit_and_that_many_are_taken():
    explorer = TimedExplorer(0.05)
    times = limits.ForwardTimes(clock=lambda: explorer.model.now)
    names = {"exact": "exact node sweep", "atp": "AtP", "eap": "EAP-IG"}
    for _ in range(5):  # however busy the machine is each time
        with pytest.raises(LimitError, match=r"would take about \d+ s .* past its 60 s bound") as refused:
            limits.circuit_time(explorer, ioi_pairs(16), list(names), None, 60, names, times=times)
        fits = int(re.search(r"at most (\d+) pairs", str(refused.value))[1])
        assert 1 <= fits < 16
        limits.circuit_time(explorer, ioi_pairs(fits), list(names), None, 60, names, times=times)
    limits.circuit_time(explorer, ioi_pairs(16), list(names), None, 0, names, times=times)  # no bound

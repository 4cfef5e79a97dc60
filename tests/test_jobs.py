"""Long jobs give a sign of life and can be stopped: the engine's steps tell a job how far its work is
and end it once its stop is set (`engine.deadline`), through real readings on the bundled model; the
app's jobs by page session, their time left (`app.jobs`); and, served, a Stop ending a circuit
SmolLM2 is computing, with the progress and the message an API client sees. The page's side, in
Chromium: tests/test_browser_stop.py."""

from __future__ import annotations

import html
import itertools
import re
import socket
import threading
import time
import types

import pytest
from gradio_client import Client

import explorer
from explorer.app import circuit_pairs, jobs
from explorer.app.limits import Cost, Readings
from explorer.app.policy import Policy
from explorer.app.ui import build_demo
from explorer.app.workspace import Workspace
from explorer.engine import deadline, pairs
from explorer.errors import StoppedError
from explorer.loading import catalog
from explorer.views import circuits as circuit_views

CLEAN = "To be, or not to be, that is the question: whether the"
CORRUPTED = "To be, or not or be, that is the question: whether the"  # as many tokens
TYPED = (
    f"{CLEAN} | {CORRUPTED} | to | be\n"
    "The king of the castle sat on the | The queen of the castle sat on the | king | queen"
)


@pytest.fixture(scope="module")
def bundled():
    return explorer.load(device="cpu")


def followed(stop_after: int | None = None):
    """A job's stop and the fractions it is told, its stop set once it has been told `stop_after`."""
    stop, told = threading.Event(), []

    def report(fraction: float) -> None:
        told.append(fraction)
        if len(told) == stop_after:
            stop.set()

    return stop, told, report


# --- the engine: steps report and stop ---


def test_steps_split_their_share_among_their_own_steps_by_weight():
    stop, told, report = followed()
    with deadline.job(stop, "the work", report):
        for _ in deadline.steps(range(2), [1, 3]):
            for _ in deadline.steps(range(2)):
                pass
    assert told == [0.125, 0.25, 0.25, 0.625, 1.0, 1.0]  # each inner step, then its outer step


def test_steps_without_a_job_yield_every_item_and_report_nothing():
    assert list(deadline.steps("abc", [0, 0, 0])) == ["a", "b", "c"]


def test_a_patching_sweeps_progress_rises_layer_by_layer_to_one(bundled):
    stop, told, report = followed()
    with deadline.job(stop, "the patching sweep", report):
        bundled.patch_heads(CLEAN, CORRUPTED, "to", "be")
    layers = bundled.config.n_layers
    assert told[:layers] == pytest.approx([(layer + 1) / layers for layer in range(layers)])
    assert told == sorted(told) and told[-1] == 1.0


def test_a_patching_sweep_stopped_after_some_steps_raises_the_stop_error_and_takes_no_more(bundled):
    stop, told, report = followed(stop_after=2)
    with (
        pytest.raises(StoppedError, match=r"^Stopped the patching sweep at your request\.$"),
        deadline.job(stop, "the patching sweep", report),
    ):
        bundled.patch_heads(CLEAN, CORRUPTED, "to", "be")
    assert max(told) == told[1]  # the step after the stop never ran


def test_a_circuits_progress_passes_each_methods_share_as_it_ends_and_reaches_one(bundled):
    data = pairs.dataset(bundled, *circuit_pairs.typed(TYPED).args())
    work = {"exact": 1.0, "atp": 1.0, "eap": 2.0, "curve": 4.0}
    stop, told, report = followed()
    with deadline.job(stop, "the circuit", report):
        circuit_views.find(bundled, data, list(circuit_views.METHODS), work=work)
    assert told == sorted(told) and told[-1] == 1.0
    for share in (0.125, 0.25, 0.5):  # where the exact sweep, AtP and EAP-IG end
        assert any(abs(fraction - share) < 1e-9 for fraction in told), share
    assert len(told) > 2 * (bundled.config.n_layers + data.size)  # layers, pairs, steps: not 4 jumps


def test_a_stopped_circuit_ends_between_two_steps(bundled):
    data = pairs.dataset(bundled, *circuit_pairs.typed(TYPED).args())
    stop, told, report = followed(stop_after=5)
    with (
        pytest.raises(StoppedError, match="^Stopped the circuit of 2 pairs"),
        deadline.job(stop, "the circuit of 2 pairs", report),
    ):
        circuit_views.find(bundled, data, list(circuit_views.METHODS))
    assert max(told) == told[4]  # no step began after the stop (the steps around it ended)


def test_a_stop_ends_a_models_load_before_its_weights_are_read():
    stop = threading.Event()
    stop.set()
    with (
        pytest.raises(StoppedError, match="^Stopped loading the bundled model"),
        deadline.job(stop, "loading the bundled model", lambda fraction: None),
    ):
        explorer.load(device="cpu")


# --- the app: jobs by session, the time left ---


def test_the_time_left_is_the_time_so_far_times_what_is_left_over_what_is_done():
    assert jobs.time_left(10.0, 0.25) == "about 30 s left"
    assert jobs.time_left(90.0, 0.25) == "about 5 min left"
    assert jobs.time_left(0.5, 0.5) == jobs.STARTING  # too soon to say
    assert jobs.time_left(30.0, 0.0) == jobs.STARTING
    assert jobs.time_left(30.0, 1.0) == "finishing"


def test_progress_is_shown_at_most_every_quarter_second_never_falls_and_always_once_done():
    now, shown = [0.0], []
    progress = jobs.Progress(lambda fraction, text: shown.append((fraction, text)), clock=lambda: now[0])
    for t, fraction in ((2.0, 0.5), (2.1, 0.6), (2.3, 0.4), (2.4, 1.0)):
        now[0] = t
        progress.told(fraction)
    assert shown == [(0.5, "about 2 s left"), (0.6, "about 2 s left"), (1.0, "finishing")]
    progress.told(0.9, "Dequantizing")
    assert shown[-1] == (1.0, "Dequantizing: finishing")


def test_stop_ends_the_jobs_of_the_session_that_asked_and_no_other():
    running = jobs.Jobs(lambda fraction, text: None)
    started, ended = {"a": threading.Event(), "b": threading.Event()}, {}

    def work(session: str) -> None:
        try:
            with running.running(session, f"the work of {session}"):
                started[session].set()
                for _ in itertools.count():
                    deadline.check()
                    time.sleep(0.005)
        except StoppedError as error:
            ended[session] = str(error)

    threads = [threading.Thread(target=work, args=(session,)) for session in started]
    for thread in threads:
        thread.start()
    for event in started.values():
        assert event.wait(10)
    assert running.stop("a") == 1
    threads[0].join(10)
    assert ended == {"a": "Stopped the work of a at your request."} and threads[1].is_alive()
    assert running.stop("a") == 0  # none left
    assert running.stop("b") == 1
    threads[1].join(10)
    assert ended["b"] == "Stopped the work of b at your request."


def test_a_reading_is_a_job_of_its_page_that_its_stop_ends(bundled):
    workspace = Workspace(device="cpu", policy=Policy())
    running = jobs.Jobs(lambda fraction, text: None)
    readings = Readings(workspace, running)
    page = types.SimpleNamespace(headers={}, client=types.SimpleNamespace(host="10.0.0.1"), session_hash="p")
    with (
        pytest.raises(StoppedError, match="^Stopped the sweep at your request"),
        readings.reading(page, Cost("the sweep", 0)),
    ):
        running.stop("p")
        bundled.patch_heads(CLEAN, CORRUPTED, "to", "be")
    assert running.stop("p") == 0  # the job is gone with its reading


# --- served: Stop (/stop) ends a circuit the server computes ---


@pytest.fixture(scope="module")
def client():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    demo = build_demo(Workspace(device="cpu"))
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
    try:
        yield Client(demo.local_url, verbose=False)
    finally:
        demo.close()


def text_of(status: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", status))


def test_stop_ends_a_circuit_the_server_computes_and_the_event_ends_with_a_message(client, smollm2_path):
    """SmolLM2's circuit of 8 pairs takes minutes on a CPU: its progress shows the time left, /stop
    ends it at its next step, and its event ends with the message, the circuit never drawn."""
    status, *_ = client.predict(catalog.SMOLLM2_LABEL, api_name="/load_model")
    assert "SmolLM2" in text_of(status)
    methods = list(circuit_views.METHODS)
    job = client.submit("built-in", "ioi", 8, 0, "", None, "logit_diff", methods, api_name="/circuit")
    for _ in range(600):  # until the server tells the time left (within a minute)
        progress = job.status().progress_data or []
        if any("s left" in (unit.desc or "") for unit in progress):
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"no time left was told: {job.status()}")
    client.predict(api_name="/stop")
    status, nodes, *_ = job.result(timeout=120)
    said = text_of(status)
    assert said.startswith("Stopped the circuit of 8 pairs") and said.endswith("at your request."), said
    assert nodes == {"__type__": "update"}  # left as it is: the views on screen stay

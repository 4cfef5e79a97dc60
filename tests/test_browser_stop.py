"""Long jobs in Chromium: a circuit SmolLM2 computes (minutes on a CPU) shows its progress with the time
left on the status line, Stop beside it; Stop ends the server's work, whose CPU time stops growing, and
the status line says so, the views on screen staying. The app serves in this process, so its CPU time
is this process's. (The engine's and the app's side, and /stop served: tests/test_jobs.py.)"""

from __future__ import annotations

import resource
import time

import pytest
from browser_support import TABS, AppPage

from explorer.loading import catalog

pytestmark = pytest.mark.browser

JS_TIME_LEFT = """() => /about \\d+ (s|min) left/.test(
    document.querySelector('#status .progress-level')?.textContent || '')"""
BUSY = 0.5  # CPU seconds a second: the server computing (a core or more)
IDLE = 0.25  # and at rest (the page's polls, this test's own)
WINDOW_S = 0.5


def cpu_seconds() -> float:
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


def cpu_rate(seconds: float = WINDOW_S) -> float:
    """CPU seconds this process used per second of the next `seconds`."""
    cpu, start = cpu_seconds(), time.monotonic()
    time.sleep(seconds)
    return (cpu_seconds() - cpu) / (time.monotonic() - start)


def load_smollm2(app: AppPage) -> None:
    app.remember_plots()
    app.page.locator("#model-source input").click()
    app.page.locator("#model-source").get_by_role("option", name=catalog.SMOLLM2_LABEL).click()
    app.wait_redrawn(TABS["Attention"])


def test_a_circuit_shows_the_time_left_within_5_s_and_stop_idles_the_server_within_3_s(app, smollm2_path):
    load_smollm2(app)
    app.page.get_by_role("tab", name="Circuit", exact=True).click()
    stop = app.page.locator("#stop-job")
    assert not stop.is_visible()  # nothing runs
    app.page.locator("#circuit-button").click()
    app.page.wait_for_function(JS_TIME_LEFT, timeout=5_000)  # within 5 s of the click
    assert stop.is_visible()
    assert cpu_rate(1.0) > BUSY  # the server computes the circuit

    stop.click()
    clicked = time.monotonic()
    while cpu_rate() > IDLE:
        assert time.monotonic() - clicked < 3.0, "the server still computes 3 s after Stop"
    assert time.monotonic() - clicked <= 3.0
    app.page.wait_for_function(
        "() => document.querySelector('#status').innerText.includes('at your request')",
        timeout=max(1, int(1000 * (3.0 - (time.monotonic() - clicked)))),
    )
    assert app.status().startswith("Stopped the circuit of 8 pairs")
    stop.wait_for(state="hidden")  # no job left to stop
    assert app.points("circuit-nodes-plot") in (None, 0)  # the views on screen stay (none drawn)
    assert not [problem for problem in app.problems() if "Loaded SmolLM2" not in problem]  # no toast of it

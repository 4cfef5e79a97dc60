"""The real Gemma-3-270M in Chromium, picked from the picker: on about 1,024 tokens of real text, a
sliding layer's pipeline draws the band the model applies (i − 512 < j ≤ i) with its edge and weight
0 left of it, a global layer its causal mask, and the Overview outlines the global layers (screenshots
of each). Skipped when the wheels are absent."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from browser_support import CHROMIUM, TABS, match_baseline

from explorer.app.examples import LONG_PASSAGE
from explorer.loading import catalog

pytestmark = pytest.mark.browser

if not Path(CHROMIUM).exists():
    pytest.skip(
        f"no {CHROMIUM}: `apt-get install -y chromium` to run the browser tests", allow_module_level=True
    )

WINDOW = 512
SOFTMAX_PANEL = 5
TOKENS = 1024  # twice the window: half the queries see only part of the prompt in a sliding layer
QUERY = 1000  # a late query, its row inside the map (hover misses a pooled map's outermost pixel)

JS_WINDOW_EDGES = """() => document.querySelector('#pipeline-plot .js-plotly-plot').data
  .filter((t) => t.type === 'scatter' && t.line && t.line.dash === 'dash')
  .map((t) => [Array.from(t.x), Array.from(t.y), t.xaxis])"""


def weight(hover: list[str]) -> float:
    """The softmax weight a hover label gives (a cell's, or a pooled block's largest), in its unit."""
    return float(re.findall(r"\d*\.?\d+", hover[-1])[-1])


@pytest.fixture(scope="module")
def gemma3_source():
    path = catalog.gemma3_gguf()
    if path is None:
        pytest.skip(f"Gemma-3-270M is not installed: {catalog.GEMMA3_INSTALL}")
    return str(path)


def prompt_of(workspace, source: str, n_tokens: int) -> str:
    """Real text that tokenizes to `n_tokens` (the Hamlet passage, repeated and cut at a token)."""
    tokenizer = workspace.explorer(source).tokenizer
    ids = tokenizer.encode("\n\n".join([LONG_PASSAGE] * 12)).ids
    text = tokenizer.decode(ids[1:n_tokens])  # after <bos>, which every run starts with
    assert workspace.run(source, text).n_tokens == n_tokens
    return text


@pytest.mark.slow
def test_gemma3_270m_picked_draws_a_sliding_and_a_global_layer_at_1k_tokens(
    app, browser_workspace, gemma3_source
):
    text = prompt_of(browser_workspace, gemma3_source, TOKENS)  # loads it here: the pick then runs at once
    app.remember_plots()
    app.page.locator("#model-source input").click()
    app.page.locator("#model-source").get_by_role("option", name=catalog.GEMMA3_LABEL).click()
    app.wait_redrawn(TABS["Attention"])
    card = app.page.locator("#model-card").inner_text()
    assert "18 layers" in card and "sliding window of 512 keys, global layers 5, 11, 17" in card
    assert app.title("pipeline-plot").startswith("Layer 0 (sliding, 512 keys) · head 0 · kv 0: ")

    app.run(text)
    ((x, y, axis),) = app.page.evaluate(JS_WINDOW_EDGES)
    assert axis == f"x{SOFTMAX_PANEL}" and x == [-0.5, TOKENS - WINDOW] and y == [WINDOW - 1, TOKENS - 0.5]
    # far left of the band, a pooled block of keys given no weight (a cell inside, not on the map's edge)
    outside = app.hover_cell("pipeline-plot", SOFTMAX_PANEL, QUERY, 100)
    assert outside[0].endswith("block around") and weight(outside) == 0, outside
    app.move_mouse_away()
    match_baseline(app.screenshot(app.page.locator("#pipeline-plot"), []), "pipeline-gemma3-270m-sliding-1k")

    app.set_layer(5)
    assert app.title("pipeline-plot").startswith("Layer 5 (global) · head 0 · kv 0: ")
    assert "→ causal mask →" in app.title("pipeline-plot") and not app.page.evaluate(JS_WINDOW_EDGES)
    match_baseline(app.screenshot(app.page.locator("#pipeline-plot"), []), "pipeline-gemma3-270m-global-1k")

    app.open_tab("Overview")
    assert "global layers (every earlier key) outlined: 5, 11, 17" in app.title("overview-plot")
    match_baseline(app.screenshot(app.page.locator("#overview-plot"), []), "overview-gemma3-270m-1k")
    assert "Loaded in" in card and not app.toasts()  # the card says it loaded; no warning, no toast
    assert not app.script_errors and not app.dialogs

"""The Attention tab's "weight by what each key writes" box in Chromium: ticking it redraws the softmax
panel and every head's map with each row of ‖α·v·W_O‖ over its sum (hover giving α and the norm, rebuilt
by the page), and unticking it brings α back; a link carries it; weighted, nothing overlaps at 1,400 px."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, quote, urlparse

import numpy as np
import pytest
from browser_support import CONTEXT, TABS, AppPage

pytestmark = pytest.mark.browser

PROMPT = "Now is the winter of our discontent made glorious summer"
SOFTMAX = 4  # the pipeline's softmax panel, of its traces (panel 5)
# Each heatmap's z as drawn (Plotly's calcdata), by trace.
JS_HEATMAPS = """(id) => {
    const gd = document.querySelector(`#${id} .js-plotly-plot`);
    return gd.calcdata.map((trace) =>
        trace[0].trace.type === "heatmap" ? trace[0].z.map((row) => Array.from(row)) : null);
}"""
JS_LAYER_2 = "() => document.querySelector('#pipeline-plot .gtitle')?.textContent.startsWith('Layer 2')"


def shares(att) -> np.ndarray:
    """Each row of ‖α·v·W_O‖ over its sum, from the engine's weighted norms.  # [H, N, N]"""
    norms = att.weighted_norms.double()
    return (norms / norms.sum(-1, keepdim=True)).numpy()


def drawn(app: AppPage, plot: str) -> list[np.ndarray]:
    return [np.array(z) for z in app.page.evaluate(JS_HEATMAPS, plot) if z is not None]


def set_weighted(app: AppPage, on: bool) -> None:
    app.remember_plots()
    app.page.locator("#weighted-maps input").set_checked(on)
    app.wait_redrawn(TABS["Attention"])


def number(text: str, name: str) -> float:
    return float(re.search(rf"{re.escape(name)} = ([-0-9.e]+)", text).group(1))


def test_ticking_the_box_redraws_the_softmax_panel_and_every_heads_map_with_each_keys_share(
    app, browser_workspace
):
    app.run(PROMPT)
    att = browser_workspace.run("", PROMPT).attention(0)
    n_heads = att.probs.shape[0]
    set_weighted(app, True)
    expected = shares(att)
    np.testing.assert_allclose(drawn(app, "pipeline-plot")[SOFTMAX], expected[0], atol=1e-6)
    grid = drawn(app, "all-heads-plot")
    assert len(grid) == n_heads
    for h, z in enumerate(grid):
        np.testing.assert_allclose(z, expected[h], atol=1e-6)
    assert "weighted by ‖v·W_O‖" in app.title("all-heads-plot")
    # hover: the share, and α and ‖α·v·W_O‖ that the page rebuilt from it
    query, key = att.probs.shape[1] - 1, 2
    text = " ".join(app.hover_cell("pipeline-plot", SOFTMAX + 1, query, key))
    assert number(text, "share") == pytest.approx(expected[0, query, key], rel=1e-3)
    assert number(text, "α") == pytest.approx(att.probs[0, query, key].item(), rel=1e-3)
    assert number(text, "‖α·v·W_O‖") == pytest.approx(att.weighted_norms[0, query, key].item(), rel=1e-3)
    app.move_mouse_away()
    set_weighted(app, False)
    np.testing.assert_allclose(drawn(app, "pipeline-plot")[SOFTMAX], att.probs[0].numpy(), atol=1e-7)
    np.testing.assert_allclose(drawn(app, "all-heads-plot")[3], att.probs[3].numpy(), atol=1e-7)
    assert not app.problems()


def test_a_link_with_weighted_opens_the_maps_weighted_and_copying_the_link_keeps_it(
    browser, app_url, browser_workspace
):
    context = browser.new_context(**CONTEXT)
    try:
        app = AppPage(context.new_page(), app_url)
        app.page.goto(f"{app_url}?__theme=light&prompt={quote(PROMPT)}&layer=2&head=5&weighted=1")
        app.wait_drawn(TABS["Attention"])
        app.page.wait_for_function(JS_LAYER_2)
        assert app.page.locator("#weighted-maps input").is_checked()
        assert not app.page.locator("#log-colours input").is_checked()
        expected = shares(browser_workspace.run("", PROMPT).attention(2))
        np.testing.assert_allclose(drawn(app, "pipeline-plot")[SOFTMAX], expected[5], atol=1e-6)
        app.page.locator("#copy-link").click()
        app.page.wait_for_function(
            "() => (document.querySelector('#share-link textarea, #share-link input') || {}).value"
        )
        link = app.page.locator("#share-link textarea, #share-link input").first.input_value()
        params = parse_qs(urlparse(link).query)
        assert params["weighted"] == ["1"] and "log" not in params and params["layer"] == ["2"]
        assert not app.problems()
    finally:
        context.close()


def test_weighted_maps_on_log_colours_leave_no_title_label_or_bar_overlapping_at_1400_px(browser, app_url):
    from test_browser_layout import WIDE, layout_problems

    context = browser.new_context(**{**CONTEXT, "viewport": WIDE})
    try:
        app = AppPage(context.new_page(), app_url).open()
        app.remember_plots()
        app.page.get_by_text("Zoom: exact values", exact=False).click()
        app.wait_redrawn(["zoom-plot"])
        app.run(PROMPT)
        app.wait_redrawn(["zoom-plot"])
        for box in ("#weighted-maps", "#log-colours"):
            app.remember_plots()
            app.page.locator(f"{box} input").check()
            app.wait_redrawn([*TABS["Attention"], "zoom-plot"])
        assert "weighted" in app.title("zoom-plot")
        found = {plot: layout_problems(app, plot) for plot in [*TABS["Attention"], "zoom-plot"]}
        assert not any(found.values()), found
    finally:
        context.close()

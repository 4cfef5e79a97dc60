"""Why this score, in Chromium: a click on a cell of the pipeline opens the score split into its sources
under it (the engine's split, screenshot) and the row's key drivers; a head's bar opens that head; a link
carries the cell; the Overview's composition card draws every pair of heads (screenshot) and a cell opens
its later head; a head opened from the Overview shows why it looks where it looks most."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import parse_qs, quote, urlparse

import numpy as np
import pytest
from browser_support import CHROMIUM, CONTEXT, AppPage, match_baseline, settle

from explorer import views

pytestmark = pytest.mark.browser

if not Path(CHROMIUM).exists():
    pytest.skip(
        f"no {CHROMIUM}: `apt-get install -y chromium` to run the browser tests", allow_module_level=True
    )

PROMPT = "To be, or not to be, that is the question. To be, or not to be"
LAYER, SOFTMAX_PANEL = 2, 5  # of the pipeline's panels: Q·Kᵀ, scaled, mask, masked, softmax
WHY = ["why-split-plot", "why-row-plot"]
# Whether the page's controls show this layer and head (the Attention tab draws it when opened).
JS_PICKED = """([layer, head]) =>
    document.querySelector("#layer-slider input[type=number]")?.value === String(layer)
    && (document.querySelector("#head-picker input")?.value || "").startsWith(`head ${head} `)"""
# The pixel centre of the first bar of a trace whose customdata names a head: [x, y, layer, head].
JS_HEAD_BAR = """([id, trace]) => {
    const gd = document.querySelector(`#${id} .js-plotly-plot`);
    const t = gd._fullData[trace];
    const i = t.customdata.findIndex((c) => c[0] >= 0);
    const xa = gd._fullLayout[t.xaxis.replace("x", "xaxis")];
    const ya = gd._fullLayout[t.yaxis.replace("y", "yaxis")];
    const box = gd.querySelector(".main-svg").getBoundingClientRect();
    const x = box.left + xa._offset + xa.d2p(t.x[i]), y = box.top + ya._offset + ya.d2p(t.y[i] / 2);
    return [x, y, ...t.customdata[i]];
}"""


def open_why(app: AppPage, query: int, key: int) -> None:

    app.remember_plots()
    app.click_cell("pipeline-plot", SOFTMAX_PANEL, query, key)
    app.wait_redrawn(WHY)
    settle(app)


def test_a_pipeline_cell_click_splits_its_score_and_a_head_bar_opens_that_head(app, browser_workspace):
    from test_browser_intervene import JS_HEATMAP

    app.run(PROMPT)
    app.set_layer(LAYER)
    settle(app)
    open_why(app, 14, 9)
    run = browser_workspace.run("", PROMPT)
    a = run.score_attribution(LAYER, 0, 14, 9)
    table = np.array(app.page.evaluate(JS_HEATMAP, ["why-split-plot", 0]))
    assert table.sum() == pytest.approx(a.score, abs=1e-4)  # named sources and "other": every part
    assert "(key 9)" in app.title("why-split-plot") and "(query 14)" in app.title("why-split-plot")
    drivers = np.array(app.page.evaluate(JS_HEATMAP, ["why-row-plot", 0]))
    np.testing.assert_allclose(drivers.sum(0), run.key_drivers(LAYER, 0, 14).parts.sum(0).numpy(), atol=1e-4)
    match_baseline(app.screenshot(app.page.locator("#why-score"), []), "why-score")

    # the split's largest source tested: taken out of its side, the real change beside the prediction
    value = app.page.locator("#why-test-source input").input_value()
    assert value.startswith(("MLP", "head", "embedding", "o_proj", "b_"))
    app.page.locator("#why-test-button").click()
    result = app.page.locator("#why-test-result .why-test-line")
    result.wait_for(timeout=60_000)
    choices = views.testable_sources(run.score_attribution(LAYER, 0, 14, 9))
    assert choices[0][0] == value
    assert result.text_content() == views.source_test(run, LAYER, 0, 14, 9, choices[0][1], "zero")

    x, y, layer, head = app.page.evaluate(JS_HEAD_BAR, ["why-split-plot", 1])  # a key-side head's bar
    app.remember_plots()
    app.page.mouse.move(x, y, steps=2)
    app.page.mouse.click(x, y)
    app.page.wait_for_function(
        "(name) => (document.querySelector('#pipeline-plot .gtitle') || {}).textContent?.startsWith(name)",
        arg=f"Layer {layer} · head {head} ",
        timeout=60_000,
    )
    assert not app.problems()


def test_the_shown_heads_thumbnail_opens_a_cell_and_anothers_switches_to_it(app):
    app.run(PROMPT)
    settle(app)
    app.remember_plots()
    app.click_cell("all-heads-plot", 1, 12, 4)  # head 0's own thumbnail: the cell's split
    app.wait_redrawn(WHY)
    assert "head 0 scores" in app.title("why-split-plot") and "(key 4)" in app.title("why-split-plot")
    assert not app.problems()


def test_a_link_carries_the_cell_and_opens_its_split(browser, app_url):
    context = browser.new_context(**CONTEXT)
    try:
        app = AppPage(context.new_page(), app_url)
        app.page.goto(f"{app_url}?__theme=light&prompt={quote(PROMPT)}&layer={LAYER}&head=3&cell=14,9")
        app.wait_drawn(WHY)
        assert "head 3 scores" in app.title("why-split-plot") and "(key 9)" in app.title("why-split-plot")
        app.page.locator("#copy-link").click()
        app.page.wait_for_function(
            "() => (document.querySelector('#share-link textarea, #share-link input') || {}).value",
            timeout=30_000,
        )
        link = app.page.locator("#share-link textarea, #share-link input").first.input_value()
        assert parse_qs(urlparse(link).query)["cell"] == ["14,9"]
        assert not app.problems()
    finally:
        context.close()


def test_the_composition_card_draws_every_pair_and_a_cell_opens_its_later_head(app, browser_workspace):
    from test_browser_intervene import JS_HEATMAP

    app.run(PROMPT)
    app.open_tab("Overview")
    app.page.locator("#composition").get_by_text("Composition", exact=False).first.click()
    app.wait_drawn(["composition-plot"])
    settle(app)
    c = browser_workspace.run("", PROMPT).explorer.composition_scores()
    n = c.k.shape[0] * c.k.shape[1]
    drawn = np.array(app.page.evaluate(JS_HEATMAP, ["composition-plot", 0]))
    np.testing.assert_allclose(drawn, c.k.reshape(n, n).numpy(), atol=1e-6)
    match_baseline(app.screenshot(app.page.locator("#composition"), []), "composition")
    hover = " ".join(app.hover_cell("composition-plot", 1, 2, 3 * 8 + 5))  # the cell under the mouse
    later = re.search(r"later head (\d+)\.(\d+)", hover)
    assert later, hover
    app.page.mouse.down()
    app.page.mouse.up()
    app.page.wait_for_function(JS_PICKED, arg=[int(later[1]), int(later[2])], timeout=60_000)
    assert not app.problems()


def test_a_head_opened_from_the_overview_shows_why_it_looks_where_it_looks_most(app, browser_workspace):
    app.run(PROMPT)
    app.open_tab("Overview")
    settle(app)
    button = app.page.locator(".top-head").first
    layer, head = int(button.get_attribute("data-layer")), int(button.get_attribute("data-head"))
    button.click()
    app.remember_plots()
    app.page.locator("#open-in-attention").click()
    app.wait_redrawn(WHY)
    run = browser_workspace.run("", PROMPT)
    last = run.n_tokens - 1
    top = int(run.attention_rows(layer, [last], head).probs[0, 0].argmax())
    title = app.title("why-split-plot")
    assert f"head {head} scores" in title and f"(query {last})" in title and f"(key {top})" in title
    assert not app.problems()


JS_PANEL = """([id, axis]) => {  // the heatmap of one subplot (its x axis: "x5"), as drawn
    const gd = document.querySelector(`#${id} .js-plotly-plot`);
    const i = gd._fullData.findIndex((t) => t.type === "heatmap" && t.xaxis === axis);
    return gd.calcdata[i][0].z.map((row) => Array.from(row, (v) => (v === null ? NaN : v)));
}"""


def test_a_cell_knocked_out_says_what_it_did_and_the_maps_show_it_until_put_back(app, browser_workspace):
    from explorer.engine.edits import Knockout

    app.run(PROMPT)
    app.set_layer(LAYER)
    settle(app)
    softmax = f"x{SOFTMAX_PANEL}"
    before = np.array(app.page.evaluate(JS_PANEL, ["pipeline-plot", softmax]))
    assert before[14, 9] > 0
    open_why(app, 14, 9)
    app.remember_plots()
    app.page.locator("#why-knockout-button").click()
    line = app.page.locator("#why-knockout-result .why-knockout-line")
    line.wait_for(timeout=60_000)
    app.wait_redrawn(["pipeline-plot"])
    settle(app)
    knockout = Knockout(((LAYER, 0, 14, 9),))
    plain, knocked = browser_workspace.run("", PROMPT), browser_workspace.run("", PROMPT, knockout)
    assert line.text_content() == views.knockout_summary(plain, knocked, knockout)
    after = np.array(app.page.evaluate(JS_PANEL, ["pipeline-plot", softmax]))
    assert after[14, 9] == 0 and np.nansum(after[14]) == pytest.approx(1.0, abs=1e-4)
    np.testing.assert_allclose(after[14], knocked.attention(LAYER).probs[0, 14].numpy(), atol=1e-5)
    assert app.page.locator("#why-score").is_visible()  # the panel stays: it is the same prompt

    app.remember_plots()
    app.page.locator("#why-restore-button").click()
    app.wait_redrawn(["pipeline-plot"])
    settle(app)
    again = np.array(app.page.evaluate(JS_PANEL, ["pipeline-plot", softmax]))
    np.testing.assert_allclose(again[14], before[14], atol=1e-6)
    app.page.locator("#why-knockout-result").wait_for(state="hidden")  # the line and its chart go
    assert not app.problems()


def test_a_link_carries_the_cells_knocked_out_and_opens_with_them_out(browser, app_url, browser_workspace):
    from explorer.engine.edits import Knockout

    context = browser.new_context(**CONTEXT)
    try:
        app = AppPage(context.new_page(), app_url)
        cells = f"{LAYER}.0:14-9,{LAYER}.0:14-8"
        app.page.goto(
            f"{app_url}?__theme=light&prompt={quote(PROMPT)}&layer={LAYER}&head=0&knockout={quote(cells)}"
        )
        app.page.locator("#status", has_text="Knockout of").wait_for(timeout=60_000)  # the link's run, then
        settle(app)
        knocked = browser_workspace.run("", PROMPT, Knockout.read(cells))
        drawn = np.array(app.page.evaluate(JS_PANEL, ["pipeline-plot", f"x{SOFTMAX_PANEL}"]))
        assert drawn[14, 8] == 0 and drawn[14, 9] == 0
        np.testing.assert_allclose(drawn[14], knocked.attention(LAYER).probs[0, 14].numpy(), atol=1e-5)
        app.page.locator("#copy-link").click()
        app.page.wait_for_function(
            "() => (document.querySelector('#share-link textarea, #share-link input') || {}).value",
            timeout=30_000,
        )
        link = app.page.locator("#share-link textarea, #share-link input").first.input_value()
        assert parse_qs(urlparse(link).query)["knockout"] == [Knockout.read(cells).spelled()]  # sorted
        assert not app.problems()
    finally:
        context.close()

"""The Lens tab in Chromium: a link opens it on its target and what it is read against, and "Copy link"
carries both; each cell shows as much of its token as it holds; a new prompt empties the target unless it
is pinned; a sweep's direct effect beside its total; a click on a token of the strip shows which heads
look at it."""

from __future__ import annotations

from urllib.parse import parse_qs, urlencode, urlparse

import numpy as np
import pytest
from browser_support import CONTEXT, DRAW_TIMEOUT_MS, TABS, AppPage, settle

pytestmark = pytest.mark.browser


JS_RANK_OF_BE = (
    "() => (document.querySelector('#lens-rank-plot .gtitle') || {}).textContent?.startsWith('“ be”')"
)
JS_TITLE_HAS = "([id, text]) => document.querySelector(`#${id} .gtitle`)?.textContent.includes(text)"
# Each drawn cell of the lens' grid: its row and column, its text, and how wide it is drawn beside the
# cell's width.
JS_LENS_CELLS = """() => {
    const gd = document.querySelector('#lens-plot .js-plotly-plot');
    const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis, first = gd._fullData[0].x[0];
    const room = Math.abs(xa.d2p(1) - xa.d2p(0));
    return [...gd.querySelectorAll('.heatmaplayer g.heatmap-label')].map((g) => [
        Math.round(ya.p2d(g.__data__.y)), Math.round(xa.p2d(g.__data__.x)) - first,
        g.textContent, g.querySelector('text').getComputedTextLength(), room,
    ]);
}"""
WINTER = "Now is the winter of our discontent made glorious summer"


def test_a_link_opens_the_lens_on_its_target_and_copying_the_link_keeps_it(browser, app_url):
    context = browser.new_context(**CONTEXT)
    try:
        app = AppPage(context.new_page(), app_url)
        link = "prompt=To+be%2C+or+not+to+be&tab=lens&target=+be&against=+to"
        app.page.goto(f"{app_url}?__theme=light&{link}")
        app.wait_drawn(TABS["Lens"])
        assert app.page.locator("#lens-target textarea, #lens-target input").first.input_value() == " be"
        assert (
            app.page.locator("#lens-distractor textarea, #lens-distractor input").first.input_value() == " to"
        )
        app.page.wait_for_function(JS_RANK_OF_BE, timeout=DRAW_TIMEOUT_MS)
        assert "logit(“ be”) − logit(“ to”)" in app.title("lens-attribution-plot")
        app.page.locator("#copy-link").click()
        box = app.page.locator("#share-link textarea, #share-link input").first
        app.page.wait_for_function(
            "() => (document.querySelector('#share-link textarea, #share-link input') || {}).value",
            timeout=DRAW_TIMEOUT_MS,
        )
        params = parse_qs(urlparse(box.input_value()).query)
        assert params["tab"] == ["lens"] and params["target"] == [" be"] and params["against"] == [" to"]
        assert not app.problems()
    finally:
        context.close()


# A link's target of markup (whole in the lens' warning that it is no single token, which quotes 40
# characters), and the markup the toasts hold.
MARKUP_TARGET = "<a href=/in><img src=/toast-probe.png>"
JS_MARKUP_IN_TOASTS = (
    "() => [...document.querySelectorAll('.toast-body a, .toast-body img')].map((e) => e.outerHTML)"
)


def test_a_links_target_of_markup_shows_in_its_toast_as_text_and_fetches_nothing(browser, app_url):
    """A toast's text is drawn as HTML: a link's target of an image or a link put them live in it."""
    context = browser.new_context(**CONTEXT)
    try:
        app = AppPage(context.new_page(), app_url)
        fetched = []
        app.page.on("request", lambda request: fetched.append(request.url))
        link = urlencode({"prompt": "To be", "tab": "lens", "target": MARKUP_TARGET})
        app.page.goto(f"{app_url}?__theme=light&{link}")
        app.wait_for_toast("it must be a single token")
        (toast,) = [text for text in app.toasts() if "single token" in text]
        assert MARKUP_TARGET in toast
        assert not app.page.evaluate(JS_MARKUP_IN_TOASTS)
        assert not [url for url in fetched if urlparse(url).path == "/toast-probe.png"]
    finally:
        context.close()


def test_a_sweeps_direct_effect_is_the_attribution_and_a_head_cell_click_opens_that_head(
    app, browser_workspace
):
    """Beside the patching map, each head's direct effect on the clean prompt; its cells open heads too."""
    from test_browser_intervene import COPY_PAIR, JS_HEATMAP, open_head_by_click, patching_example

    app.run("Now is the winter of our discontent")
    patching_example(app)
    app.page.wait_for_function("() => document.querySelector('#patching-direct-plot .js-plotly-plot')")
    settle(app)
    run = browser_workspace.run("", COPY_PAIR.clean)
    expected = run.logit_attribution(COPY_PAIR.answer, COPY_PAIR.distractor)
    drawn = np.array(app.page.evaluate(JS_HEATMAP, ["patching-direct-plot", 0]))
    np.testing.assert_allclose(drawn, expected.heads.numpy(), atol=1e-5)

    open_head_by_click(app, "patching-direct-plot", 3, 2, back_to="Intervene")
    assert app.page.locator("#prompt textarea").input_value() == COPY_PAIR.clean
    assert not app.problems()


def test_a_click_on_a_strip_token_draws_the_heads_looking_at_it_and_a_cell_opens_that_head(
    app, browser_workspace
):
    from test_browser_intervene import JS_HEATMAP, open_head_by_click

    prompt = "To be, or not to be, that is the question"
    app.run(prompt)
    app.page.locator("#token-strip .token").nth(2).click()
    app.wait_drawn(["heads-looking-at-plot"])
    settle(app)
    run = browser_workspace.run("", prompt)
    drawn = np.array(app.page.evaluate(JS_HEATMAP, ["heads-looking-at-plot", 0]))
    np.testing.assert_allclose(drawn, run.attention_to(2, -1).numpy(), atol=1e-6)
    assert "(position 2)" in app.title("heads-looking-at-plot")

    open_head_by_click(app, "heads-looking-at-plot", 1, 3, back_to="the heads looking at the token")

    app.run("Now is the winter of our discontent")  # a new prompt: the old positions' panel goes
    app.page.wait_for_function(
        "() => !document.querySelector('#heads-looking-at-plot .js-plotly-plot')", timeout=DRAW_TIMEOUT_MS
    )
    assert not app.problems()


def lens_cells(app: AppPage) -> list[tuple[int, int, str, float, float]]:
    return [(int(r), int(c), text, w, room) for r, c, text, w, room in app.page.evaluate(JS_LENS_CELLS)]


def test_each_lens_cell_shows_as_much_of_its_token_as_it_holds(browser, app_url, browser_workspace):
    """At 1,400 px ten positions leave a cell some 100 px: every token whole (it was cut to three
    characters and "…" at any width); squeezed to the grid's narrowest, each is cut to fit its cell."""
    from explorer import views

    context = browser.new_context(**{**CONTEXT, "viewport": {"width": 1400, "height": 900}})
    try:
        app = AppPage(context.new_page(), app_url).open()
        app.run(WINTER)
        app.open_tab("Lens")
        whole = views.lens_grid(browser_workspace.run("", WINTER)).data[0]["meta"]["fit_text"]
        cells = lens_cells(app)
        assert len(cells) == sum(map(len, whole))
        assert all(text == whole[row][col] for row, col, text, _, _ in cells)
        assert any(len(text) > 5 for _, _, text, _, _ in cells)  # " glorious", " summer"
        assert all(width <= room for *_, width, room in cells)

        app.remember_plots()
        app.page.set_viewport_size({"width": 560, "height": 900})  # the card scrolls: 44 px a cell
        app.page.wait_for_function(
            "() => document.querySelector('#lens-plot .js-plotly-plot')._fullLayout.width < 1000"
        )
        fitted = f"() => {{ const cells = ({JS_LENS_CELLS})(); return cells.length > 0 && "
        fitted += "cells.every((c) => c[3] <= c[4]) && cells.some((c) => c[2].endsWith('…')); }"
        app.page.wait_for_function(fitted)  # the redraw's labels fitted again
        cut = [(row, col, text) for row, col, text, _, _ in lens_cells(app) if text != whole[row][col]]
        assert cut and all(text.endswith("…") and whole[r][c].startswith(text[:-1]) for r, c, text in cut)
        assert all(width <= room for *_, width, room in lens_cells(app))
        assert not app.problems()
    finally:
        context.close()


def test_a_new_prompt_empties_the_target_unless_it_is_pinned(app):
    target = app.page.locator("#lens-target textarea, #lens-target input").first
    against = app.page.locator("#lens-distractor textarea, #lens-distractor input").first
    app.run("To be, or not to be, that is the question")
    app.open_tab("Lens")
    target.fill(" be")
    target.press("Enter")
    app.page.wait_for_function(JS_TITLE_HAS, arg=["lens-rank-plot", "“ be” (typed)"], timeout=DRAW_TIMEOUT_MS)
    against.fill(" to")
    against.press("Enter")
    # read against " to" (the rank's title already named " be")
    app.page.wait_for_function(JS_TITLE_HAS, arg=["lens-attribution-plot", "“ to”"], timeout=DRAW_TIMEOUT_MS)

    app.run("Now is the winter of our discontent")
    app.page.wait_for_function(
        JS_TITLE_HAS, arg=["lens-rank-plot", "(the model's prediction there)"], timeout=DRAW_TIMEOUT_MS
    )
    assert target.input_value() == "" and against.input_value() == ""
    assert "−" not in app.title("lens-attribution-plot")

    app.page.locator("#lens-pinned input").check()
    target.fill(" the")
    target.press("Enter")
    app.page.wait_for_function(
        JS_TITLE_HAS, arg=["lens-rank-plot", "“ the” (typed)"], timeout=DRAW_TIMEOUT_MS
    )
    app.remember_plots()
    app.run("Now is the winter of our discontent made glorious summer")
    app.wait_redrawn(["lens-rank-plot"])
    assert target.input_value() == " the" and "“ the” (typed)" in app.title("lens-rank-plot")
    assert not app.problems()


def test_a_head_clicked_in_the_attribution_opens_in_the_attention_tab_and_the_button_comes_back(app):
    from test_browser_intervene import open_head_by_click

    app.run("To be, or not to be, that is the question")
    app.open_tab("Lens")
    settle(app)
    open_head_by_click(app, "lens-attribution-plot", 1, 3, back_to="Lens")
    app.page.locator("#back-to-chart").click()
    app.wait_for_tab("Lens")
    assert not app.page.locator("#back-to-chart").is_visible()
    assert not app.problems()

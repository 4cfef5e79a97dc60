"""The Lens tab in Chromium: a link opens it on its target, and "Copy link" carries the target; a sweep's
direct effect beside its total; a click on a token of the strip shows which heads look at it."""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import numpy as np
import pytest
from browser_support import CONTEXT, TABS, AppPage

pytestmark = pytest.mark.browser


JS_RANK_OF_BE = (
    "() => (document.querySelector('#lens-rank-plot .gtitle') || {}).textContent?.startsWith('“ be”')"
)


def test_a_link_opens_the_lens_on_its_target_and_copying_the_link_keeps_it(browser, app_url):
    context = browser.new_context(**CONTEXT)
    try:
        app = AppPage(context.new_page(), app_url)
        app.page.goto(f"{app_url}?__theme=light&prompt=To+be%2C+or+not+to+be&tab=lens&target=+be")
        app.wait_drawn(TABS["Lens"])
        assert app.page.locator("#lens-target textarea, #lens-target input").first.input_value() == " be"
        app.page.wait_for_function(JS_RANK_OF_BE, timeout=30_000)
        assert "“ be”" in app.title("lens-attribution-plot")
        app.page.locator("#copy-link").click()
        box = app.page.locator("#share-link textarea, #share-link input").first
        app.page.wait_for_function(
            "() => (document.querySelector('#share-link textarea, #share-link input') || {}).value",
            timeout=30_000,
        )
        params = parse_qs(urlparse(box.input_value()).query)
        assert params["tab"] == ["lens"] and params["target"] == [" be"]
        assert not app.problems()
    finally:
        context.close()


def test_a_sweeps_direct_effect_is_the_attribution_and_a_head_cell_click_opens_that_head(
    app, browser_workspace
):
    """Beside the patching map, each head's direct effect on the clean prompt; its cells open heads too."""
    from test_browser_intervene import COPY_PAIR, JS_HEATMAP, open_head_by_click, patching_example, settle

    app.run("Now is the winter of our discontent")
    patching_example(app)
    app.page.wait_for_function("() => document.querySelector('#patching-direct-plot .js-plotly-plot')")
    settle(app)
    run = browser_workspace.run("", COPY_PAIR.clean)
    expected = run.logit_attribution(COPY_PAIR.answer, COPY_PAIR.distractor)
    drawn = np.array(app.page.evaluate(JS_HEATMAP, ["patching-direct-plot", 0]))
    np.testing.assert_allclose(drawn, expected.heads.numpy(), atol=1e-5)

    open_head_by_click(app, "patching-direct-plot", 3, 2)
    assert app.page.locator("#prompt textarea").input_value() == COPY_PAIR.clean
    assert not app.problems()


def test_a_click_on_a_strip_token_draws_the_heads_looking_at_it_and_a_cell_opens_that_head(
    app, browser_workspace
):
    from test_browser_intervene import JS_HEATMAP, open_head_by_click, settle

    prompt = "To be, or not to be, that is the question"
    app.run(prompt)
    app.page.locator("#token-strip .token").nth(2).click()
    app.wait_drawn(["heads-looking-at-plot"])
    settle(app)
    run = browser_workspace.run("", prompt)
    drawn = np.array(app.page.evaluate(JS_HEATMAP, ["heads-looking-at-plot", 0]))
    np.testing.assert_allclose(drawn, run.attention_to(2, -1).numpy(), atol=1e-6)
    assert "(position 2)" in app.title("heads-looking-at-plot")

    open_head_by_click(app, "heads-looking-at-plot", 1, 3)

    app.run("Now is the winter of our discontent")  # a new prompt: the old positions' panel goes
    app.page.wait_for_function(
        "() => !document.querySelector('#heads-looking-at-plot .js-plotly-plot')", timeout=30_000
    )
    assert not app.problems()

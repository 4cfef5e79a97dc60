"""The Lens tab in Chromium: a link opens it on its target, and "Copy link" carries the target."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
from browser_support import CHROMIUM, CONTEXT, TABS, AppPage

pytestmark = pytest.mark.browser

if not Path(CHROMIUM).exists():
    pytest.skip(
        f"no {CHROMIUM}: `apt-get install -y chromium` to run the browser tests", allow_module_level=True
    )


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

"""What a newcomer meets in Chromium (issue 23): the picker never names another model than the one the
views use, every part of every figure can be reached on a phone, figures fit their card when their tab
opens, an Overview cell leads somewhere, links restore everything a person set, and nothing stale is
offered."""

from __future__ import annotations

from pathlib import Path

import pytest
from browser_support import CHROMIUM, CONTEXT, TABS, AppPage

from explorer.loading import catalog

pytestmark = pytest.mark.browser

if not Path(CHROMIUM).exists():
    pytest.skip(
        f"no {CHROMIUM}: `apt-get install -y chromium` to run the browser tests", allow_module_level=True
    )

PHONE = {"width": 390, "height": 844}
WIDE = {"width": 1400, "height": 900}
LONG = " ".join(["To be, or not to be, that is the question: whether 'tis nobler in the mind"] * 3)


def open_page(browser, app_url, viewport=None, query: str = "") -> tuple[AppPage, object]:
    context = browser.new_context(**{**CONTEXT, "viewport": viewport or CONTEXT["viewport"]})
    page = AppPage(context.new_page(), app_url + query)
    return page.open(), context


@pytest.fixture
def wide(browser, app_url):
    page, context = open_page(browser, app_url, WIDE)
    try:
        yield page
    finally:
        context.close()


def picker_value(app: AppPage) -> str:
    return app.page.locator("#model-source input").input_value()


def card(app: AppPage) -> str:
    return app.page.locator("#model-card").inner_text()


# --- item 4: the picker names the model the views use ------------------------------------------------


def test_a_typed_model_that_cannot_load_puts_the_loaded_ones_name_back_in_the_picker(app):
    box = app.page.locator("#model-source input")
    box.click()
    box.fill("/no/such/model")
    box.press("Enter")
    app.wait_for_toast("No directory '/no/such/model'")
    app.page.wait_for_function(
        "(label) => document.querySelector('#model-source input').value === label", arg=catalog.BUNDLED_LABEL
    )
    assert "shakespeare-gqa" in card(app)


NO_SMOLLM2 = f"SmolLM2 is not installed: {catalog.SMOLLM2_INSTALL}"


@pytest.mark.skipif(catalog.smollm2_gguf() is None, reason=NO_SMOLLM2)
def test_picking_a_model_loads_it_and_runs_the_prompt_without_the_load_button(app):
    app.remember_plots()
    app.page.locator("#model-source input").click()
    app.page.locator("#model-source").get_by_role("option", name=catalog.SMOLLM2_LABEL).click()
    app.wait_redrawn(TABS["Attention"])
    assert "SmolLM2" in card(app) and picker_value(app) == catalog.SMOLLM2_LABEL
    assert app.title("pipeline-plot").startswith("Layer 0 · head 0 · kv 0")
    assert "30 layers" in card(app)

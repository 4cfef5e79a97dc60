"""What a newcomer meets in Chromium (issue 23): the picker never names another model than the one the
views use, every part of every figure can be reached on a phone, figures fit their card when their tab
opens, an Overview cell leads somewhere, links restore everything a person set, and nothing stale is
offered."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from browser_support import CHROMIUM, CONTEXT, TABS, AppPage
from playwright.sync_api import Error as PlaywrightError

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


# --- item 6: on a phone, every part of every figure can be reached --------------------------------

# A plot's card and figure, as laid out: how far the figure's right edge lies past the card's, and how
# far the card has scrolled.
JS_REACH = """(id) => {
  const card = document.getElementById(id), gd = card.querySelector(".js-plotly-plot");
  const c = card.getBoundingClientRect(), g = gd.getBoundingClientRect();
  return { past: g.right - c.right, scrolled: card.scrollLeft, top: c.top, left: c.left, width: c.width,
           height: Math.min(c.height, window.innerHeight - Math.max(c.top, 0)) };
}"""


@pytest.fixture
def touch_phone(browser, app_url):
    context = browser.new_context(**{**CONTEXT, "viewport": PHONE, "has_touch": True, "is_mobile": True})
    try:
        yield AppPage(context.new_page(), app_url).open(), context
    finally:
        context.close()


def swipe_left(context, page, plot: str) -> None:
    """A finger drawn from right to left across the middle of a plot's card, as on a phone."""
    page.locator(f"#{plot}").scroll_into_view_if_needed()
    box = page.evaluate(JS_REACH, plot)
    x0, x1 = box["left"] + 0.85 * box["width"], box["left"] + 0.1 * box["width"]
    y = max(box["top"], 0) + box["height"] / 2
    cdp = context.new_cdp_session(page)
    cdp.send("Input.dispatchTouchEvent", {"type": "touchStart", "touchPoints": [{"x": x0, "y": y}]})
    for step in range(1, 13):
        x = x0 + (x1 - x0) * step / 12
        cdp.send("Input.dispatchTouchEvent", {"type": "touchMove", "touchPoints": [{"x": x, "y": y}]})
    cdp.send("Input.dispatchTouchEvent", {"type": "touchEnd", "touchPoints": []})
    cdp.detach()
    page.wait_for_timeout(100)


def reach_right_edge(context, page, plot: str) -> dict:
    """Swipe across a plot until its card scrolls no further; where its figure's right edge is then."""
    before = None
    for _ in range(12):
        reach = page.evaluate(JS_REACH, plot)
        if reach["past"] <= 1 or reach["scrolled"] == before:
            return reach
        before = reach["scrolled"]
        swipe_left(context, page, plot)
    return page.evaluate(JS_REACH, plot)


@pytest.mark.parametrize("tab", list(TABS))
def test_on_a_phone_a_swipe_reaches_every_figures_right_edge(touch_phone, tab):
    phone, context = touch_phone
    phone.run(LONG)
    phone.open_tab(tab)
    plots = TABS[tab]
    if tab == "Attention":  # and the zoom, once opened
        phone.remember_plots()
        phone.page.get_by_text("Zoom: exact values", exact=False).click()
        phone.wait_redrawn(["zoom-plot"])
        plots = [*plots, "zoom-plot"]
    for plot in plots:
        reach = reach_right_edge(context, phone.page, plot)
        assert reach["past"] <= 1, f"{plot}: its right {reach['past']:.0f} px cannot be reached"
    assert phone.page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]


def test_on_a_phone_a_sideways_wheel_scrolls_a_wide_figure(touch_phone):
    phone, _ = touch_phone
    phone.page.locator("#pipeline-plot").scroll_into_view_if_needed()
    box = phone.page.evaluate(JS_REACH, "pipeline-plot")
    phone.page.mouse.move(box["left"] + box["width"] / 2, max(box["top"], 0) + box["height"] / 2)
    phone.page.mouse.wheel(2000, 0)
    phone.page.wait_for_function(f"({JS_REACH})('pipeline-plot').past <= 1", timeout=5000)


# --- item 7: figures fit their card whenever their tab opens ------------------------------------------

# Each plot of a tab on screen: its figure's width as drawn (its SVG; its div always spans the card)
# and its card's inner width (the card less padding).
JS_WIDTHS = """(ids) => ids.map((id) => {
  const card = document.getElementById(id), gd = card.querySelector(".js-plotly-plot");
  const style = getComputedStyle(card);
  const inner = card.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
  return [id, Math.round(gd.querySelector(".main-svg").getBoundingClientRect().width), Math.round(inner)];
})"""


def assert_fit(app: AppPage, plots: list[str]) -> None:
    """Each plot's figure as wide as its card, once the tab has had up to 5 s to lay them out."""
    fits = f"(ids) => ({JS_WIDTHS})(ids).every(([, figure, card]) => Math.abs(figure - card) <= 2)"
    with contextlib.suppress(PlaywrightError):  # said below, plot by plot
        app.page.wait_for_function(fits, arg=plots, timeout=5000, polling=100)
    for plot, figure, card in app.page.evaluate(JS_WIDTHS, plots):
        assert abs(figure - card) <= 2, f"{plot}: a {figure} px figure in a {card} px card"


def test_after_an_overview_pick_the_attention_figures_fit_their_cards(wide):
    wide.run(LONG)
    assert_fit(wide, TABS["Attention"])
    wide.open_tab("Overview")
    wide.remember_plots()
    wide.click_cell("overview-plot", 1, row=2, col=6)
    wide.wait_redrawn(["pipeline-plot", "all-heads-plot"])  # drawn while their tab is hidden
    wide.page.get_by_role("tab", name="Attention", exact=True).click()
    assert_fit(wide, TABS["Attention"])


@pytest.mark.parametrize("tab", ["RoPE", "GQA", "Faithfulness"])
def test_a_layer_switched_on_another_tab_fits_its_card_when_its_tab_opens(wide, tab):
    wide.run(LONG)
    wide.open_tab(tab)
    wide.set_layer(2)  # redraws the Attention tab's figures (and those of `tab`) while Attention is hidden
    wide.open_tab("Attention")
    assert_fit(wide, TABS["Attention"])
    wide.open_tab(tab)
    assert_fit(wide, TABS[tab])


def test_from_a_link_to_the_overview_a_pick_then_attention_fits(browser, app_url):
    context = browser.new_context(**{**CONTEXT, "viewport": WIDE})
    try:
        page = AppPage(context.new_page(), app_url)
        page.page.goto(f"{app_url}?__theme=light&tab=overview")
        page.wait_drawn(TABS["Overview"])
        page.remember_plots()
        page.click_cell("overview-plot", 1, row=2, col=6)
        page.wait_redrawn(TABS["Attention"])  # drawn while their tab is hidden
        page.page.get_by_role("tab", name="Attention", exact=True).click()
        assert_fit(page, TABS["Attention"])
        assert page.title("pipeline-plot").startswith("Layer 2 · head 6 ")
    finally:
        context.close()

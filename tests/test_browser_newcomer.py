"""What a newcomer meets in Chromium (issue 23): the picker never names another model than the one the
views use, every part of every figure can be reached on a phone, figures fit their card when their tab
opens, an Overview cell leads somewhere, links restore everything a person set, and nothing stale is
offered."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
from browser_support import CONTEXT, JS_CELL_CENTRE, TABS, AppPage, settle
from playwright.sync_api import Error as PlaywrightError

from explorer.loading import catalog

pytestmark = pytest.mark.browser

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
    wide.page.wait_for_function(
        "() => document.querySelector('#layer-slider input[type=number]').value === '2'"
    )
    wide.page.get_by_role("tab", name="Attention", exact=True).click()
    wide.wait_redrawn(["pipeline-plot", "all-heads-plot"])  # the layer view draws once on screen
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


# --- item 10: an Overview pick leads somewhere -----------------------------------------------------------

# The frames the Overview draws around the picked cell: (axis, head, layer) of each.
JS_PICKED_FRAMES = """() => {
  const gd = document.querySelector("#overview-plot .js-plotly-plot");
  return (gd.layout.shapes || []).filter((s) => s.name === "picked")
    .map((s) => [s.xref, (s.x0 + s.x1) / 2, (s.y0 + s.y1) / 2]);
}"""


def picked_frames(app: AppPage) -> list:
    return app.page.evaluate(JS_PICKED_FRAMES)


def test_an_overview_pick_is_framed_named_and_opens_in_attention(app):
    app.run(LONG)
    app.open_tab("Overview")
    panels = ["x", "x2", "x3", "x4", "x5"]
    assert picked_frames(app) == [[x, 0, 0] for x in panels]  # layer 0, head 0 to begin with
    app.remember_plots()
    app.click_cell("overview-plot", 3, row=2, col=6)  # layer 2, head 6 on the third panel
    app.wait_redrawn(["pipeline-plot"])
    assert picked_frames(app) == [[x, 6, 2] for x in panels]
    assert app.page.locator("#overview-picked-text").inner_text() == "Picked: layer 2 · head 6"
    app.page.locator("#open-in-attention").click()
    assert app.page.get_by_role("tab", name="Attention", exact=True).get_attribute("aria-selected") == "true"
    assert app.title("pipeline-plot").startswith("Layer 2 · head 6 ")
    assert app.page.locator("#pipeline-plot").bounding_box()["y"] < CONTEXT["viewport"]["height"] / 2


def test_the_top_heads_of_each_score_are_listed_and_a_click_picks_one(app, browser_workspace):
    app.run(LONG)
    app.open_tab("Overview")
    columns = app.page.locator("#top-heads .top-column")
    assert columns.count() == 5
    titles = [columns.nth(i).locator(".top-title").inner_text() for i in range(5)]
    assert titles[:3] == ["previous-token heads", "sink heads", "induction heads"]
    profile = browser_workspace.cached_run("", LONG).profile
    best = np.unravel_index(np.nanargmax(profile["previous_token"]), profile["previous_token"].shape)
    first = columns.nth(0).locator(".top-head").first
    assert columns.nth(0).locator(".top-head").count() == 5
    assert first.inner_text().startswith(f"{best[0]}.{best[1]} ")
    app.remember_plots()
    columns.nth(1).locator(".top-head").nth(2).click()  # the third sink head
    layer, head = (
        int(v) for v in columns.nth(1).locator(".top-head").nth(2).inner_text().split()[0].split(".")
    )
    app.wait_redrawn(["pipeline-plot"])
    assert app.title("pipeline-plot").startswith(f"Layer {layer} · head {head} ")
    assert picked_frames(app)[0][1:] == [head, layer]


def test_on_a_phone_a_tap_on_an_overview_cell_picks_that_head(touch_phone):
    phone, _ = touch_phone
    phone.run(LONG)
    phone.open_tab("Overview")
    phone.page.locator("#overview-plot").scroll_into_view_if_needed()
    x, y = phone.page.evaluate(JS_CELL_CENTRE, ["overview-plot", "xaxis", "yaxis", 1, 3])
    phone.remember_plots()
    phone.page.touchscreen.tap(x, y)
    phone.wait_redrawn(["pipeline-plot"])
    assert phone.title("pipeline-plot").startswith("Layer 1 · head 3 ")


# --- item 11: a link restores everything a person set -----------------------------------------------------


def set_number(app: AppPage, box: str, value: int) -> None:
    number = app.page.locator(f"{box} input[type=number]")
    number.fill(str(value))
    number.press("Tab")


def test_a_copied_link_restores_log_colours_rope_positions_ablated_heads_and_patching_prompts(
    app, browser, app_url
):
    from test_browser_intervene import open_intervene

    app.run(LONG)
    app.remember_plots()
    app.page.locator("#log-colours input").check()
    app.wait_redrawn(["pipeline-plot"])
    app.set_layer(1)
    app.pick_head("head 2 · kv 0")
    app.open_tab("RoPE")
    settle(app)  # the tab's views follow layer 1, head 2 once it opens
    app.remember_plots()
    set_number(app, "#rope-query", 60)
    app.wait_redrawn(["rope-rotation-plot"])
    app.remember_plots()
    set_number(app, "#rope-key", 4)
    app.wait_redrawn(["rope-rotation-plot"])
    open_intervene(app)  # its boxes filled from the prompt before they are typed in
    app.page.locator("#ablate-add").click()
    app.page.locator("#ablate-heads").get_by_text("1.2 · kv 0").wait_for()
    app.page.locator("#ablate-mode").get_by_text("mean").click()
    patching = {"clean": "When Mary and John went", "corrupted": "When Alice and John went"}
    patching |= {"answer": " Mary", "distractor": " John"}
    for name, text in patching.items():
        app.page.locator(f"#patch-{name} textarea, #patch-{name} input").first.fill(text)
    app.page.locator("#copy-link").click()
    box = app.page.locator("#share-link textarea, #share-link input").first
    app.page.wait_for_function(
        "() => (document.querySelector('#share-link textarea, #share-link input') || {}).value"
    )
    link = box.input_value()
    assert link.startswith(app_url.rstrip("/"))

    context = browser.new_context(**CONTEXT)
    try:
        other = AppPage(context.new_page(), app_url)
        other.page.goto(link)
        other.wait_drawn(TABS["Attention"])
        assert other.page.locator("#log-colours input").is_checked()
        assert other.title("pipeline-plot").startswith("Layer 1 · head 2 ")
        other.page.get_by_role("tab", name="RoPE", exact=True).click()
        for slider, value in (("#rope-query", 60), ("#rope-key", 4)):
            other.page.wait_for_function(
                "([id, v]) => document.querySelector(`${id} input[type=number]`)?.value === String(v)",
                arg=[slider, value],
            )
        other.page.get_by_role("tab", name="Intervene", exact=True).click()
        other.wait_drawn(["ablation-plot"])  # the heads were ablated again after the link's run
        assert other.page.locator("#ablate-heads").get_by_text("1.2 · kv 0").count() == 1
        assert other.page.locator("#ablate-mode input[value=mean]").is_checked()
        for name, text in patching.items():
            field = other.page.locator(f"#patch-{name} textarea, #patch-{name} input").first
            assert field.input_value() == text
    finally:
        context.close()


# --- item 12: nothing stale is offered -------------------------------------------------------------------


JS_LINK_SHOWN = "() => document.querySelector('#share-link textarea, #share-link input').value"


def link_box(app: AppPage):
    return app.page.locator("#share-link textarea, #share-link input").first


def test_a_download_or_link_of_an_earlier_view_is_taken_away_when_the_view_changes(app):
    app.run("To be, or not to be, that is the question")
    with app.page.expect_download() as download:  # one click: the file comes at once, nothing is left
        app.page.locator("#download-csv").click()
    assert "layer0-head0" in download.value.suggested_filename
    app.page.locator("#copy-link").click()
    app.page.wait_for_function(JS_LINK_SHOWN)
    app.pick_head("head 3 · kv 0")  # another view: the old link goes
    app.page.wait_for_function(f"() => !({JS_LINK_SHOWN})()")
    with app.page.expect_download() as download:  # and the head's own map comes with the next click
        app.page.locator("#download-csv").click()
    assert "layer0-head3" in download.value.suggested_filename

    app.page.locator("#copy-link").click()
    app.page.wait_for_function(JS_LINK_SHOWN)
    app.remember_plots()
    app.page.locator("#log-colours input").check()
    app.wait_redrawn(["pipeline-plot"])
    assert link_box(app).input_value() == ""

    app.page.locator("#copy-link").click()
    app.page.wait_for_function(JS_LINK_SHOWN)
    app.open_tab("GQA")  # another tab is another view: its link is not the one shown
    app.page.wait_for_function(f"() => !({JS_LINK_SHOWN})()")
    app.page.locator("#copy-link").click()
    app.page.wait_for_function(f"() => ({JS_LINK_SHOWN})().includes('tab=gqa')")


JS_TRACKER_SHOWN = """() => {
    const tracker = document.querySelector('#status [data-testid=status-tracker]');
    return getComputedStyle(tracker).visibility === 'visible';
}"""


def test_progress_shows_only_for_work_longer_than_a_third_of_a_second(app):
    tracker = "#status [data-testid=status-tracker]"
    app.wait_view_settled()
    app.page.wait_for_function(f"() => document.querySelector('{tracker}').classList.contains('hide')")
    app.page.evaluate(f"() => document.querySelector('{tracker}').classList.remove('hide')")  # pending now
    assert not app.page.evaluate(JS_TRACKER_SHOWN)
    app.page.wait_for_timeout(400)
    assert app.page.evaluate(JS_TRACKER_SHOWN)


# --- item 14: smaller things a newcomer meets --------------------------------------------------------------

JS_STOP_DISABLED = "() => document.querySelector('#stop-button').disabled"


def test_stop_is_enabled_only_while_a_generation_streams(app):
    app.page.get_by_role("tab", name="Generate", exact=True).click()
    box = app.page.locator("#max-new-tokens input[type=number]")
    box.fill("200")
    box.press("Tab")
    assert app.page.evaluate(JS_STOP_DISABLED)  # nothing runs
    app.page.locator("#generate-button").click()
    app.page.wait_for_function(f"() => !({JS_STOP_DISABLED})()", timeout=30_000)
    app.page.wait_for_function(JS_STOP_DISABLED, timeout=60_000)  # the generation ended: idle again
    assert "new tokens" in app.status()


def test_intervene_shows_no_empty_chart_frames_before_its_first_result(app):
    app.page.get_by_role("tab", name="Intervene", exact=True).click()
    app.page.locator("#ablate-button").wait_for()
    for plot in ("ablation-plot", "patching-plot"):
        assert app.page.locator(f"#{plot}").bounding_box()["height"] <= 1, plot
    app.set_layer(1)
    app.page.locator("#ablate-add").click()
    app.page.locator("#ablate-heads").get_by_text("1.0 · kv 0").wait_for()
    app.page.locator("#ablate-button").click()
    app.wait_drawn(["ablation-plot"])
    assert app.page.locator("#ablation-plot").bounding_box()["height"] > 150
    assert_fit(app, ["ablation-plot"])
    assert app.page.locator("#patching-plot").bounding_box()["height"] <= 1


def test_the_jargon_has_its_explanation_on_hover_in_the_page(app):
    titles = app.page.locator("#intro abbr[title], #pipeline-key abbr[title]").evaluate_all(
        "abbrs => abbrs.map(a => [a.textContent, a.title])"
    )
    assert [text for text, _ in titles] == ["SDPA", "eager", "Hatched"]
    assert all(len(title) > 40 for _, title in titles)


JS_TOAST_MESSAGES = "() => [...document.querySelectorAll('[data-testid=toast-text]')].map((e) => e.innerText)"


def test_a_default_model_that_cannot_load_is_warned_of_once(browser):
    """Each message of a toast counts ("Warning (2)" holds two): the run warned, and the Intervene tab's
    step after every run tried the model again and warned a second time."""

    from explorer.app.policy import Policy
    from explorer.app.workspace import Workspace
    from tests.conftest import served

    workspace = Workspace(default_model="/no/such/model", device="cpu", policy=Policy())
    context = browser.new_context(**CONTEXT)
    try:
        with served(workspace) as url:
            app = AppPage(context.new_page(), url)
            app.page.goto(f"{url}?__theme=light")
            app.page.locator("#status", has_text="/no/such/model").wait_for()
            settle(app)
            messages = app.page.evaluate(JS_TOAST_MESSAGES)
            assert len(messages) == 1 and "/no/such/model" in messages[0], messages
    finally:
        context.close()

"""Readable everywhere, in Chromium: characters (not bytes) in the strip and on the axes, a phone's
width with no overlapping labels and no sideways scroll, log colours, links that restore a view, the
.npz download, clicks that pick a head, and Enter in the prompt."""

from __future__ import annotations

import urllib.parse

import numpy as np
import pytest
from browser_support import CONTEXT, JS_OVERLAPS, TABS, AppPage, match_baseline, settle

from explorer.views.export import LAYER_FIELDS

pytestmark = pytest.mark.browser

ACCENTS = "Crème brûlée 🌹 — naïve"
PHONE = {"width": 390, "height": 844}
LONG = " ".join(["To be, or not to be, that is the question: whether 'tis nobler in the mind"] * 3)
# How far a plot's first x axis title sits below the lowest of that axis' tick labels as shown: the
# room its margin keeps beyond the labels a person reads.
JS_TITLE_GAP = """(id) => {
  const gd = document.querySelector(`#${id} .js-plotly-plot`);
  const shown = [...gd.querySelectorAll(".subplot.xy .xaxislayer-above .xtick text")]
    .filter((t) => getComputedStyle(t).visibility !== "hidden")
    .map((t) => t.getBoundingClientRect())
    .filter((b) => b.height > 0);
  const title = gd.querySelector(".g-xtitle text").getBoundingClientRect();
  return title.top - Math.max(...shown.map((b) => b.bottom));
}"""
JS_SOFTMAX_IMAGE = """() => {
  const images = document.querySelectorAll('#pipeline-plot .heatmaplayer image');
  return images[images.length - 1].getAttribute('href');
}"""


@pytest.fixture
def phone(browser, app_url):
    context = browser.new_context(**{**CONTEXT, "viewport": PHONE})
    page = context.new_page()
    try:
        yield AppPage(page, app_url).open()
    finally:
        context.close()


def test_accented_and_emoji_prompts_show_characters_in_the_strip_and_on_the_axes(app):
    app.run(ACCENTS)
    strip = app.strip_tokens()
    assert "è¹" in strip and "è²" in strip and any("🌹" in t for t in strip) and "—¹" in strip
    ticks = list(app.tick_labels("pipeline-plot", "y").values())
    assert "è¹" in ticks and all("\\x" not in t and "\u2063" not in t for t in ticks + strip)
    position = strip.index("è¹")
    hover = app.hover_cell("pipeline-plot", 5, position, position)
    assert "byte 1 of 2 of “è”" in hover[0], hover


def test_a_split_characters_tick_label_takes_the_room_it_shows_not_its_hover_text(app):
    # "è¹" is a tick (a short prompt labels every position) whose hover text goes on: "è¹ (byte 1 of 2
    # of “è”)" (the test above hovers it). Plotly sized the margin to the whole text before the page
    # cut it, and the maps lost a third of their height to a blank band: a 122 px gap above "key".
    # Now the title sits just under the labels shown (2.3 px on this machine).
    app.run(ACCENTS)
    assert "è¹" in app.tick_labels("pipeline-plot", "x").values()
    assert 0 <= app.page.evaluate(JS_TITLE_GAP, "pipeline-plot") <= 12


def test_a_link_opens_exactly_that_view(browser_context, app_url):
    prompt = "Now is the winter of our discontent"
    query = urllib.parse.urlencode({"prompt": prompt, "layer": 2, "head": 5, "tab": "rope"})
    page = browser_context.new_page()
    try:
        app = AppPage(page, app_url + "?" + query + "&")
        page.goto(f"{app.url}__theme=light")
        app.wait_drawn(TABS["RoPE"])
        assert page.locator("#prompt textarea").input_value() == prompt
        assert page.get_by_role("tab", name="RoPE", exact=True).get_attribute("aria-selected") == "true"
        page.locator("#copy-link").click()
        link = page.locator("#share-link textarea, #share-link input").first
        page.wait_for_function(
            "() => document.querySelector('#share-link textarea, #share-link input').value"
        )
        shared = urllib.parse.parse_qs(urllib.parse.urlsplit(link.input_value()).query)
        q, k = shared.pop("q"), shared.pop("k")  # the RoPE positions on screen (their defaults here)
        assert shared == {"prompt": [prompt], "layer": ["2"], "head": ["5"], "tab": ["rope"]}
        assert [q, k] == [
            [page.locator(f"#rope-{s} input[type=number]").input_value()] for s in ("query", "key")
        ]
        app.open_tab("Attention")  # the layer view draws once on screen
        app.wait_drawn(["pipeline-plot"])
        assert app.title("pipeline-plot").startswith("Layer 2 · head 5 · kv 1:")
    finally:
        page.close()


def test_the_npz_download_holds_the_layers_tensors_as_the_python_api_gives_them(
    app, browser_workspace, tmp_path
):
    app.run(ACCENTS)
    app.set_layer(1)
    with app.page.expect_download() as download:  # one click
        app.page.locator("#download-npz").click()
    path = tmp_path / "layer.npz"
    download.value.save_as(path)
    saved = np.load(path)
    run = browser_workspace.run("", ACCENTS)
    att = run.attention(1)
    for name in LAYER_FIELDS:
        expected = getattr(att, name).numpy()
        assert saved[name].dtype == (np.int64 if name == "kv_head" else np.float32), name
        np.testing.assert_allclose(saved[name], expected, atol=1e-6, err_msg=name)
    assert saved["ids"].tolist() == run.ids and saved["tokens"].tolist() == [str(t) for t in run.tokens]


# Whether a plot's toolbar (shown on a tap) would cover its title.
JS_TOOLBAR_ON_TITLE = """(id) => {
    const gd = document.querySelector(`#${id} .js-plotly-plot`);
    const bar = gd.querySelector('.modebar').getBoundingClientRect();
    const title = gd.querySelector('.gtitle').getBoundingClientRect();
    const across = bar.left < title.right && bar.right > title.left;
    return across && bar.top < title.bottom && bar.bottom > title.top;
}"""


@pytest.mark.parametrize("tab", list(TABS))
def test_at_phone_width_no_labels_overlap_and_the_page_never_scrolls_sideways(phone, tab):
    phone.run(LONG)
    phone.open_tab(tab)
    for plot in TABS[tab]:
        assert phone.page.evaluate(JS_OVERLAPS, plot) == [], plot
        assert not phone.page.evaluate(JS_TOOLBAR_ON_TITLE, plot), plot
    assert phone.page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]


def test_log_colours_change_the_colours_and_not_the_hover(app):
    app.run("To be, or not to be, that is the question")
    last = len(app.strip_tokens()) - 1
    before, image = app.hover_cell("pipeline-plot", 5, last, 3), app.page.evaluate(JS_SOFTMAX_IMAGE)
    app.remember_plots()
    app.page.locator("#log-colours input").check()
    app.wait_redrawn(["pipeline-plot", "all-heads-plot"])
    assert app.page.evaluate(JS_SOFTMAX_IMAGE) != image
    app.move_mouse_away()
    assert app.hover_cell("pipeline-plot", 5, last, 3) == before


def test_clicking_an_overview_cell_or_a_thumbnail_picks_that_head(app, browser_workspace):
    app.run(LONG)
    app.open_tab("Overview")
    app.remember_plots()
    app.click_cell("overview-plot", 1, row=2, col=6)  # layer 2, head 6 on the first panel
    app.page.wait_for_function(
        "() => document.querySelector('#layer-slider input[type=number]').value === '2'"
    )
    app.open_tab("Attention")  # the layer view draws once on screen
    app.wait_redrawn(["pipeline-plot"])
    assert app.title("pipeline-plot").startswith("Layer 2 · head 6 ")
    app.remember_plots()
    app.click_cell("all-heads-plot", 4, row=5, col=1)  # the thumbnail of head 3
    app.wait_redrawn(["pipeline-plot"])
    assert app.title("pipeline-plot").startswith("Layer 2 · head 3 ")


def test_enter_runs_the_prompt_and_shift_enter_starts_a_new_line(app):
    box = app.page.locator("#prompt textarea")
    box.fill("first line")
    box.press("Shift+Enter")
    box.type("second line")
    assert box.input_value() == "first line\nsecond line"
    app.remember_plots()
    box.press("Enter")
    app.wait_redrawn(TABS["Attention"])
    assert "".join(app.strip_tokens()) == "first line↵second line"


@pytest.mark.parametrize("tab", ["Attention", "RoPE"])
def test_phone_view_matches_its_baseline_screenshot(phone, tab):
    phone.run("To be, or not to be, that is the question")
    phone.open_tab(tab)
    panel = phone.page.locator(f"#tab-{tab.lower()}")
    match_baseline(phone.screenshot(panel, []), f"view-{tab.lower()}-390")


# Where the picker's text ends (its input less the room kept on the right) and its arrow starts.
JS_PICKER_ROOM = """() => {
    const input = document.querySelector('#model-source input');
    const arrow = document.querySelector('#model-source .icon-wrap').getBoundingClientRect();
    const text = input.getBoundingClientRect().right - parseFloat(getComputedStyle(input).paddingRight);
    return [text, arrow.left, input.scrollWidth > input.clientWidth];
}"""


def test_on_a_phone_a_long_model_name_stops_before_the_arrow_and_a_load_covers_nothing(phone, smollm2_path):
    """SmolLM2 picked at 390 px: its label (longer than the picker) is cut before the dropdown's arrow,
    and what was loaded in how long is said on the card, with no toast over the page's header
    (baseline screenshot of the picker and card)."""

    from explorer.loading.catalog import SMOLLM2_LABEL

    box = phone.page.locator("#model-source input")
    box.fill(SMOLLM2_LABEL)
    box.press("Enter")
    card = phone.page.locator("#model-card")
    card.filter(has_text="SmolLM2-135M-Instruct").filter(has_text="Loaded in").wait_for(timeout=300_000)
    settle(phone)  # the run a load starts, drawn
    text_ends, arrow_starts, cut = phone.page.evaluate(JS_PICKER_ROOM)
    assert text_ends <= arrow_starts and cut and box.input_value() == SMOLLM2_LABEL
    assert not phone.toasts()
    column = phone.page.locator("div.column:has(> div.form > #model-source)")  # the picker, button and card
    match_baseline(phone.screenshot(column, [card.locator(".card-note")]), "header-model-390")


# The strip's scrolling box, and the tokens it shows only in part (cut by its top or bottom edge).
JS_STRIP_CUT = """() => {
    const box = document.querySelector('#token-strip-content .token').parentElement;
    const frame = box.getBoundingClientRect();
    const cut = [...box.querySelectorAll('.token')].filter((token) => {
        const r = token.getBoundingClientRect();
        const seen = r.top < frame.bottom && r.bottom > frame.top;
        return seen && (r.top < frame.top - 0.5 || r.bottom > frame.bottom + 0.5);
    });
    return [box.scrollHeight > box.clientHeight, cut.map((token) => token.textContent)];
}"""


def test_the_token_strip_shows_whole_rows_and_scrolls_the_rest(app):
    from explorer.app.examples import LONG_PASSAGE

    app.run(LONG_PASSAGE)
    scrolls, cut = app.page.evaluate(JS_STRIP_CUT)
    assert scrolls and cut == []  # its last row was cut in half

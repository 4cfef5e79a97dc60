"""The Generate tab in Chromium: tokens stream in and the rows grow, the step slider looks back, a layer
switch redraws from the kept generation, Stop stops the model, Show puts the sequence in every view; a
baseline screenshot at 1,200 px, and no overlapping labels or sideways scroll at 390 px."""

from __future__ import annotations

import time
from urllib.parse import parse_qs, urlparse

import pytest
from browser_support import CONTEXT, GENERATE_PLOTS, JS_OVERLAPS, TABS, AppPage, match_baseline
from test_browser_readable import PHONE

from explorer.app.examples import SHAKESPEARE_LINE

pytestmark = pytest.mark.browser

# The rows the generation heatmap holds, as drawn (0 before it is drawn).
JS_ROWS = """() => {
    const gd = document.querySelector("#generation-plot .js-plotly-plot");
    return gd && Array.isArray(gd.calcdata) && gd.calcdata.length ? gd.calcdata[0][0].z.length : 0;
}"""
# Every row count the heatmap is drawn with from now on, each time it changes (polled: cheap, where an
# observer of the whole page would slow the drawing it watches).
JS_RECORD_ROWS = f"""() => {{
    window.__rowCounts = [];
    const rows = {JS_ROWS};
    setInterval(() => {{
        const n = rows(), seen = window.__rowCounts;
        if (n && seen[seen.length - 1] !== n) seen.push(n);
    }}, 20);
}}"""
# Each step waits this long before it is sent, so a browser on a busy machine draws some of them one by
# one (it draws only the latest of the updates that came while it was drawing).
STEP_DELAY_S = 0.3
# Before Stop, each step waits longer: a page that falls behind its updates (a browser starved of CPU
# draws a step's figures slower than 0.3 s) takes the click only once it has drawn them all.
STOP_STEP_DELAY_S = 1.0
JS_SHOW_ENABLED = "() => !document.querySelector('#show-generation').disabled"
QUIET_MS = 3_000  # long enough for several steps, had the model not stopped
JS_CAUGHT_UP = (
    f"""() => ({JS_ROWS})() === 1 + Number(document.querySelector("#step-slider input[type=number]").value)"""
)


def pace(monkeypatch, workspace, seconds: float) -> None:
    """The app's generations, each step held back `seconds` before it is sent."""
    steps = workspace.steps

    def held_back(key):
        for step in steps(key):
            time.sleep(seconds)
            yield step

    monkeypatch.setattr(workspace, "steps", held_back)


@pytest.fixture
def paced(monkeypatch, browser_workspace):
    pace(monkeypatch, browser_workspace, STEP_DELAY_S)


@pytest.fixture
def slowly_paced(monkeypatch, browser_workspace):
    pace(monkeypatch, browser_workspace, STOP_STEP_DELAY_S)


def open_generate(app: AppPage, max_new_tokens: int) -> None:
    app.page.get_by_role("tab", name="Generate", exact=True).click()
    box = app.page.locator("#max-new-tokens input[type=number]")
    box.fill(str(max_new_tokens))
    box.press("Tab")


def rows(app: AppPage) -> int:
    return app.page.evaluate(JS_ROWS)


def wait_rows(app: AppPage, n: int) -> None:
    app.page.wait_for_function(f"() => ({JS_ROWS})() >= {n}", timeout=60_000, polling=50)


def generate(app: AppPage, max_new_tokens: int) -> None:
    """Generate from the prompt on the page and wait until it finishes (Show is enabled again)."""
    open_generate(app, max_new_tokens)
    app.page.locator("#generate-button").click()
    wait_rows(app, max_new_tokens)
    app.page.wait_for_function(JS_SHOW_ENABLED, timeout=60_000)


def test_generating_8_tokens_grows_the_rows_and_the_step_slider_looks_back(app, browser_workspace, paced):
    open_generate(app, 8)
    app.page.evaluate(JS_RECORD_ROWS)
    app.page.locator("#generate-button").click()
    wait_rows(app, 8)
    app.page.wait_for_function(JS_SHOW_ENABLED, timeout=60_000)
    app.page.wait_for_function(JS_CAUGHT_UP, timeout=60_000)
    counts = app.page.evaluate("() => window.__rowCounts")
    assert counts[-1] == 8 and counts == sorted(set(counts)), counts
    assert len(counts) >= 2, f"the rows came all at once, not as steps arrived: {counts}"

    expected = browser_workspace.explorer("").generate(SHAKESPEARE_LINE, max_new_tokens=8)
    steps = list(expected)
    text = app.page.locator("#generated-text textarea").input_value()
    assert text == browser_workspace.explorer("").tokenizer.decode(expected.ids[expected.n_prompt :])
    assert app.title("candidates-plot").startswith("Step 7: ")

    app.remember_plots()
    step = app.page.locator("#step-slider input[type=number]")
    step.fill("2")
    step.press("Tab")
    app.wait_redrawn(GENERATE_PLOTS)
    assert rows(app) == 3
    assert app.title("candidates-plot").startswith(
        f"Step 2: the candidates after position {steps[2].position}"
    )

    app.remember_plots()
    layer = app.page.locator("#layer-slider input[type=number]")
    layer.fill("2")
    layer.press("Tab")
    app.wait_redrawn(["generation-plot"])
    assert app.title("generation-plot").startswith("Layer 2 · head 0 · kv 0") and rows(app) == 3
    assert not app.problems()


def test_stop_stops_the_model_and_keeps_what_was_shown(app, browser_workspace, slowly_paced):
    open_generate(app, 256)
    app.page.locator("#generate-button").click()
    wait_rows(app, 2)
    app.page.locator("#stop-button").dispatch_event("click")  # a busy page still takes it between draws
    app.page.locator("#status", has_text="Stop ended it after the step under way").wait_for()
    app.page.wait_for_function(JS_SHOW_ENABLED, timeout=60_000)
    app.page.wait_for_function(JS_CAUGHT_UP, timeout=60_000)  # every step sent before Stop is drawn
    shown = rows(app)
    embeds = []
    model = browser_workspace.explorer("").model
    hook = model.embed_tokens.register_forward_hook(lambda *_: embeds.append(1))
    try:
        app.page.wait_for_timeout(QUIET_MS)
    finally:
        hook.remove()
    assert not embeds, "the model kept running after Stop"
    assert rows(app) == shown < 100
    slider = app.page.locator("#step-slider input[type=number]")
    assert int(slider.input_value()) == shown - 1
    expected = browser_workspace.explorer("").generate(SHAKESPEARE_LINE, max_new_tokens=shown)
    list(expected)  # greedy: the steps taken before Stop
    text = app.page.locator("#generated-text textarea").input_value()
    assert text == browser_workspace.explorer("").tokenizer.decode(expected.ids[expected.n_prompt :])


def test_show_puts_the_generated_sequence_in_every_view(app, browser_workspace):
    generate(app, 8)
    app.remember_plots()
    app.page.locator("#show-generation").click()
    app.wait_redrawn(TABS["Attention"])
    tokens = app.strip_tokens()
    assert len(tokens) == browser_workspace.run("", SHAKESPEARE_LINE).n_tokens + 8
    assert "".join(tokens).startswith(SHAKESPEARE_LINE)
    app.page.locator("#status", has_text="Every view shows the generated sequence").wait_for()
    assert f"({len(tokens)} tokens, 8 of them new)" in app.status()
    app.open_tab("Overview")
    assert app.points("overview-plot") and not app.problems()


def test_generate_view_matches_its_baseline_screenshot(app):
    generate(app, 8)
    panel = app.page.locator("#tab-generate")
    match_baseline(app.screenshot(panel, []), "view-generate")


def test_at_phone_width_no_generate_labels_overlap_and_the_page_never_scrolls_sideways(browser, app_url):
    context = browser.new_context(**{**CONTEXT, "viewport": PHONE})
    try:
        phone = AppPage(context.new_page(), app_url).open()
        generate(phone, 8)
        for plot in GENERATE_PLOTS:
            assert phone.page.evaluate(JS_OVERLAPS, plot) == [], plot
        assert phone.page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    finally:
        context.close()


def test_steer_shows_the_plain_steered_and_prompted_continuations(app, browser_workspace):
    """The prompt on screen steered with the panel's defaults: three rows, as the engine reads them."""
    from explorer.app.ui import steer
    from explorer.engine import steering

    app.page.get_by_role("tab", name="Generate", exact=True).click()  # the page's first prompt on screen
    assert app.page.locator("#prompt textarea").input_value() == SHAKESPEARE_LINE
    app.page.locator("#steer").get_by_text("Steer", exact=True).first.click()  # the accordion opens
    app.page.locator("#steer-button").click()
    rows = app.page.locator("#steer-table tr.steer-row")
    rows.nth(2).wait_for(timeout=120_000)
    ex = browser_workspace.explorer(None)
    vector = ex.steering_vector(steer.POSITIVE.splitlines(), steer.NEGATIVE.splitlines(), 2)
    words = [word.strip() for word in steer.WORDS.split(",")]
    readings = steering.compare(
        ex,
        SHAKESPEARE_LINE,
        words,
        steer.HELD_OUT,
        vector,
        2,
        (0.0, 4.0),
        steer.INSTRUCTION,
        steer.NEW_TOKENS,
    )
    for i, reading in enumerate(readings):
        cells = rows.nth(i).locator("td").all_text_contents()
        assert cells[0] == reading.label
        assert float(cells[2]) == pytest.approx(reading.concept_probability, abs=2e-4)
        assert float(cells[3].replace(",", "")) == pytest.approx(reading.held_out_perplexity, rel=1e-3)
    assert "Steered at layer 2 with strength 4" in app.status()
    # the link carries the steering on screen, and opens with the panel open and its settings in place
    app.page.locator("#copy-link").click()
    app.page.wait_for_function(
        "() => (document.querySelector('#share-link textarea, #share-link input') || {}).value",
        timeout=30_000,
    )
    link = app.page.locator("#share-link textarea, #share-link input").first.input_value()
    params = parse_qs(urlparse(link).query)
    assert params["tab"] == ["generate"] and params["steer_layer"] == ["2"] and params["strength"] == ["4"]
    assert params["towards"] == [steer.POSITIVE] and params["instruction"] == [steer.INSTRUCTION]
    assert not app.problems()
    changed = link.replace("strength=4", "strength=-2.5").replace("steer_layer=2", "steer_layer=3")
    opened = AppPage(app.page.context.new_page(), app.url)
    try:
        opened.page.goto(changed)
        strength = opened.page.locator("#steer-strength input[type=number]")
        strength.wait_for(timeout=60_000)  # visible: the panel opened
        opened.page.wait_for_function(
            "() => document.querySelector('#steer-strength input[type=number]').value === '-2.5'",
            timeout=30_000,
        )
        assert opened.page.locator("#steer-layer input").input_value() == "3"
        assert opened.page.locator("#steer-positive textarea").input_value() == steer.POSITIVE
        assert not opened.problems()
    finally:
        opened.page.close()

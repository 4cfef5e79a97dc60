"""The app in a real browser (Debian's Chromium, driven by Playwright): what a person sees after
typing a prompt, moving the layer and head, opening each view and hovering a cell, compared with
baseline screenshots in tests/screenshots/ (`UPDATE_SCREENSHOTS=1` rewrites them)."""

from __future__ import annotations

import re

import pytest
from browser_support import CONTEXT, TABS, AppPage, match_baseline

from explorer.engine.tokens import printable
from explorer.figures.common import MAX_TICK_LABELS

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def workspace(browser_workspace):
    return browser_workspace


PROMPT = "To be, or not to be, that is the question"
HOSTILE_PROMPTS = ["<img src=x onerror=alert(1)>", "<script>alert(document.domain)</script> & <b>bold</b>"]
SOFTMAX_PANEL = 5  # of the pipeline's panels: Q·Kᵀ, scaled, mask, masked, softmax
# What changes from run to run, hidden in the screenshots: the faithfulness view's timing bars.
VARYING = {"Faithfulness": ["#faithfulness-plot .draglayer :is(.nsewdrag, .wdrag, .ewdrag, .edrag)"]}


@pytest.fixture(scope="module")
def shown(browser_context, app_url):
    """One tab that has run PROMPT, shared by the screenshot tests (each opens its own view)."""
    page = browser_context.new_page()
    app = AppPage(page, app_url).open()
    app.run(PROMPT)
    yield app
    page.close()


def tokens_of(workspace, prompt: str) -> list[str]:
    """The run's tokens as the app labels them (the app has already run this prompt: no forward)."""
    return [printable(token) for token in workspace.run("", prompt).tokens]


def by_position(tokens: list[str]) -> dict[int, str]:
    return dict(enumerate(tokens))


def names(hover_line: str, role: str, position: int, token: str) -> bool:
    """Does a hover line name this query or key: its position, then its token (quoted or not)?"""
    return re.fullmatch(f'{role} {position} [“"]?{re.escape(token)}[”"]?', hover_line) is not None


def test_every_view_draws_its_plots_with_data(app):
    app.run(PROMPT)
    for tab, plots in TABS.items():
        app.open_tab(tab)
        empty = [plot for plot in plots if not app.points(plot)]
        assert not empty, f"the {tab} view drew plots without data: {empty}"
    assert not app.problems()


def test_pipeline_tick_labels_are_the_runs_tokens(app, workspace):
    app.run(PROMPT)
    tokens = tokens_of(workspace, PROMPT)
    assert len(tokens) <= MAX_TICK_LABELS, "a prompt short enough for every token to be labelled"
    assert app.shown_tick_labels("pipeline-plot", "x") == by_position(tokens)
    assert app.shown_tick_labels("pipeline-plot", "y") == by_position(tokens)
    assert app.strip_tokens() == tokens


IOI = "When Mary and John went to the store, John gave a drink to"
# A late redraw of the figure on screen, as Run is pressed: the pipeline's data changes before the run's
# own figure arrives (as a head the page draws, or a resize, may redraw it).
JS_REDRAW_ON_RUN = """() => document.querySelector('#run-button').addEventListener('click', () => {
    const gd = document.querySelector('#pipeline-plot .js-plotly-plot');
    window.Plotly.react(gd, gd.data.map((trace) => ({ ...trace })), gd.layout);
}, { capture: true, once: true })"""


def test_at_1400_px_every_token_of_a_15_token_prompt_labels_every_panel_and_none_overlap(
    browser, app_url, workspace
):
    """Five panels side by side leave each key 13 px: set a little smaller, every label fits."""
    context = browser.new_context(**{**CONTEXT, "viewport": {"width": 1400, "height": 900}})
    try:
        app = AppPage(context.new_page(), app_url).open()
        app.run(IOI)
        tokens = by_position(tokens_of(workspace, IOI))
        assert len(tokens) == 15
        for panel in ("xy", "x2y2", "x3y3", "x4y4", "x5y5"):
            assert app.shown_tick_labels("pipeline-plot", "x", panel) == tokens, panel
        assert app.shown_tick_labels("pipeline-plot", "y") == tokens
        assert app.overlapping_texts("pipeline-plot") == []
    finally:
        context.close()


def test_a_run_is_read_once_its_own_figure_is_drawn_not_a_late_redraw_of_the_one_before(app, workspace):
    app.page.evaluate(JS_REDRAW_ON_RUN)
    app.run(PROMPT)
    assert app.shown_tick_labels("pipeline-plot", "x") == by_position(tokens_of(workspace, PROMPT))


def test_hovering_a_softmax_cell_names_its_query_and_key(app, workspace):
    app.run(PROMPT)
    tokens = tokens_of(workspace, PROMPT)
    query, key = len(tokens) - 1, 2
    lines = app.hover_cell("pipeline-plot", SOFTMAX_PANEL, query, key)
    assert names(lines[0], "query", query, tokens[query]), lines
    assert names(lines[1], "key", key, tokens[key]), lines


def test_head_picker_lists_every_head_with_its_kv_head(app, workspace):
    config = workspace.explorer("").config
    group = config.n_heads // config.n_kv_heads
    assert app.head_options() == [f"head {h} · kv {h // group}" for h in range(config.n_heads)]


def test_switching_layer_and_head_redraws_the_views_for_them(app, workspace):
    config = workspace.explorer("").config
    layer, head = config.n_layers - 1, config.n_heads - 1
    label = f"head {head} · kv {config.n_kv_heads - 1}"
    app.run(PROMPT)
    app.set_layer(layer)
    assert app.title("pipeline-plot").startswith(f"Layer {layer} · head 0 ")
    assert app.title("all-heads-plot").startswith(f"Layer {layer}:")
    app.pick_head(label)
    assert app.title("pipeline-plot").startswith(f"Layer {layer} · {label}")
    assert app.points("pipeline-plot") and app.points("all-heads-plot")
    assert not app.problems()


@pytest.mark.parametrize("prompt", HOSTILE_PROMPTS, ids=["img-onerror", "script"])
def test_markup_in_a_prompt_shows_as_literal_text_and_runs_nothing(app, workspace, prompt):
    app.run(prompt)
    assert "".join(workspace.run("", prompt).tokens) == prompt
    tokens = tokens_of(workspace, prompt)
    assert app.strip_tokens() == tokens
    ticks = app.tick_labels("pipeline-plot", "x")
    assert ticks and all(label == tokens[position] for position, label in ticks.items())
    last = len(tokens) - 1
    hover = app.hover_cell("pipeline-plot", SOFTMAX_PANEL, last, 0)
    assert names(hover[0], "query", last, tokens[last]), hover
    assert not app.injected_elements()
    assert not app.dialogs and not app.problems()


def test_an_empty_prompt_clears_the_views_and_the_page_keeps_working(app, workspace):
    app.type_prompt("")
    app.press_run()
    app.page.locator("#status", has_text="The prompt is empty").wait_for()
    app.page.wait_for_function("() => !document.querySelector('#pipeline-plot .js-plotly-plot')?.data")
    assert app.strip_tokens() == [] and not app.problems()  # the old views went, and nothing failed

    app.run(PROMPT)
    assert app.tick_labels("pipeline-plot", "x") == by_position(tokens_of(workspace, PROMPT))
    assert "The prompt is empty" not in app.status()


# The Intervene tab's prompts, filled from the prompt on screen as it opens (its `prefill`)
JS_PREFILLED = "() => document.querySelector('#patch-clean textarea')?.value !== ''"


# Each overview panel's axis ranges and its cells' image box, as drawn.
JS_OVERVIEW_BOXES = """() => {
    const gd = document.querySelector('#overview-plot .js-plotly-plot');
    return [...gd.querySelectorAll('.heatmaplayer image')].map((image, i) => {
        const n = i === 0 ? '' : String(i + 1);
        const box = ['x', 'y', 'width', 'height'].map((name) => Number(image.getAttribute(name)));
        return [gd._fullLayout['xaxis' + n].range, gd._fullLayout['yaxis' + n].range, box];
    });
}"""


def test_a_run_drawn_under_the_picked_heads_frame_leaves_the_overviews_cells_on_its_axes(app):
    """The Overview drawn while a head is framed (a run with the tab open) draws its cells from the
    axes' edges, as one drawn before the frame came."""
    app.run(PROMPT)
    app.open_tab("Overview")
    app.page.evaluate(
        "() => document.querySelector('#overview-plot').dispatchEvent("
        "new CustomEvent('frame-cell', {detail: {x: 0, y: 0}}))"
    )
    framed = app.page.evaluate(JS_OVERVIEW_BOXES)
    app.remember_plots()
    app.type_prompt("To be, or not to be: to be is the question")  # a repeat: every panel drawn
    app.press_run()
    app.wait_redrawn(["overview-plot"])
    drawn = app.page.evaluate(JS_OVERVIEW_BOXES)
    assert [box[:2] for _, _, box in drawn] == [[0, 0]] * len(drawn)
    assert [ranges[:2] for ranges in drawn] == [ranges[:2] for ranges in framed]
    assert not app.problems()


@pytest.mark.parametrize("tab", list(TABS))
def test_view_matches_its_baseline_screenshot(shown, tab):
    app = shown
    app.open_tab(tab)
    if tab == "Intervene":  # its empty prompts fill from the prompt on screen as it opens
        app.page.wait_for_function(JS_PREFILLED)
    panel = app.page.locator(f"#tab-{tab.lower()}")
    mask = [app.page.locator(selector) for selector in VARYING.get(tab, [])]
    match_baseline(app.screenshot(panel, mask), f"view-{tab.lower()}")

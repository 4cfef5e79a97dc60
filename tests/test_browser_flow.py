"""The Flow tab in Chromium: the graph draws the engine's routes, an attention edge's hover lists its heads,
and a click on it opens its layer and top head."""

from __future__ import annotations

import pytest
from browser_support import TABS, settle

pytestmark = pytest.mark.browser

PROMPT = "To be, or not to be, that is the question: whether 'tis nobler in the mind to suffer"
# The middle of the first attention edge between two tokens, in page pixels, and its (layer, head).
JS_ATTENTION_EDGE = """() => {
    const gd = document.querySelector('#flow-plot .js-plotly-plot');
    const k = gd._fullData.findIndex((t) => t.mode === 'markers');
    const picks = gd._fullData[k].customdata;
    const i = picks.findIndex((pick) => pick[1] >= 0);
    const point = gd.calcdata[k][i];  // x and y decoded from the typed arrays the server sent
    const box = gd.querySelector('.main-svg').getBoundingClientRect();
    const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
    return [box.left + xa._offset + xa.d2p(point.x), box.top + ya._offset + ya.d2p(point.y), picks[i]];
}"""


def test_the_graph_is_the_engines_and_an_attention_edge_opens_its_head(app, browser_workspace):
    app.run(PROMPT)
    app.open_tab("Flow")
    settle(app)
    run = browser_workspace.run("", PROMPT)
    g = run.information_flow(-1, 0.04)
    drawn = app.page.evaluate(
        "() => document.querySelector('#flow-plot .js-plotly-plot').data.find((t) => t.mode === 'markers')"
        ".customdata.length"
    )
    assert drawn == len(g.edges)
    assert app.points("rollout-plot") == 2 * run.n_tokens  # rollout beside the graph's own share

    app.page.locator("#flow-plot").scroll_into_view_if_needed()
    x, y, (layer, head) = app.page.evaluate(JS_ATTENTION_EDGE)
    app.page.mouse.move(x - 3, y - 3)
    app.page.mouse.move(x, y, steps=2)
    label = app.page.locator("#flow-plot .hoverlayer .hovertext", has_text=f"head {head}:").first
    label.wait_for()  # Plotly hovers at most once each 50 ms: the move's first step may show first
    hover = label.text_content()
    assert f"layer {layer}" in hover and f"head {head}:" in hover and "attention" in hover
    app.remember_plots()
    app.page.mouse.click(x, y)
    app.wait_redrawn(["pipeline-plot"])
    settle(app)
    app.wait_for_tab("Attention")
    assert app.page.locator("#pipeline-plot").is_visible()
    assert app.title("pipeline-plot").startswith(f"Layer {layer} · head {head} ")
    app.page.locator("#back-to-chart").click()
    app.wait_for_tab("Flow")
    assert not app.problems()


def test_a_new_threshold_redraws_the_graph_with_fewer_routes(app, browser_workspace):
    app.run(PROMPT)
    app.open_tab("Flow")
    settle(app)
    before = app.points("flow-plot")
    app.remember_plots()
    slider = app.page.locator("#flow-threshold input[type=number]")
    slider.fill("0.2")
    slider.press("Tab")
    app.wait_redrawn(TABS["Flow"][:1])
    settle(app)
    run = browser_workspace.run("", PROMPT)
    assert "≥ 0.2" in app.title("flow-plot") and app.points("flow-plot") < before
    assert len(run.information_flow(-1, 0.2).edges) < len(run.information_flow(-1, 0.04).edges)
    assert not app.problems()

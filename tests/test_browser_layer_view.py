"""The layer view draws what `explorer.figures` builds: for exact float32 maps, 8-bit maps, maps weighted
by what each key writes and maps pooled past 512 tokens, every heatmap the component draws in Chromium
(its cells as Plotly laid them out, its colour range, its hover template and hover data) equals the
trace of the Python figure for that run, layer and head: the wire format, the decoder and the
component's own Plotly change nothing on the way."""

from __future__ import annotations

import json

import numpy as np
import pytest
from browser_support import CONTEXT, AppPage

from explorer import views

pytestmark = pytest.mark.browser

SHORT = "To be, or not to be, that is the question"  # exact float32 maps
IDLE = ("heads", "beside")  # what the layer view asks for on its own once a layer is drawn and idle
LONG = " ".join(["Now is the winter of our discontent made glorious summer by this sun of York;"] * 9)
# Each heatmap as the layer view drew it: Plotly's laid-out cells and its full trace's settings.
JS_DRAWN = """() => {
    const gd = document.querySelector('#pipeline-plot .js-plotly-plot');
    const plain = (v) => (v && typeof v === 'object' ? Array.from(v, plain) : Number.isNaN(v) ? null : v);
    return gd.calcdata.filter((c) => c[0].trace.type === 'heatmap').map((c) => {
        const t = c[0].trace;
        return { z: plain(c[0].z), zmin: t.zmin, zmax: t.zmax, hover: t.hovertemplate,
                 custom: t.customdata ? plain(t.customdata) : null };
    });
}"""


def assert_drawn_as_built(app, run, layer: int, head: int, style: views.MapStyle) -> None:
    drawn = app.page.evaluate(JS_DRAWN)
    built = [
        trace for trace in views.pipeline(run, layer, head, style).figure().data if trace.type == "heatmap"
    ]
    assert len(drawn) == len(built) == 5
    for i, (shown, trace) in enumerate(zip(drawn, built, strict=True)):
        expected = np.asarray(trace.z, dtype=np.float64)
        cells = np.array([[np.nan if v is None else v for v in row] for row in shown["z"]], dtype=np.float64)
        assert cells.shape == expected.shape, (i, cells.shape, expected.shape)
        # float32 on both sides: equal to the bit, NaN where the mask hides a cell
        np.testing.assert_array_equal(cells, expected, err_msg=f"panel {i}")
        if trace.zmin is not None:
            assert (shown["zmin"], shown["zmax"]) == pytest.approx((trace.zmin, trace.zmax), rel=1e-6)
        assert shown["hover"] == trace.hovertemplate, i
        if trace.customdata is not None:
            custom = np.array(shown["custom"], dtype=np.float64)
            np.testing.assert_allclose(custom, np.asarray(trace.customdata, np.float64), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize(
    ("prompt", "weighted"), [(SHORT, False), (LONG, False), (SHORT, True)], ids=["exact", "8-bit", "weighted"]
)
def test_each_head_the_view_draws_is_the_figure_python_builds(app, browser_workspace, prompt, weighted):
    app.run(prompt)
    if weighted:
        app.remember_plots()
        app.page.locator("#weighted-maps input").check()
        app.wait_redrawn(["pipeline-plot"])
    style = views.MapStyle(weighted=weighted)
    run = browser_workspace.run("", prompt)
    assert_drawn_as_built(app, run, 0, 0, style)  # the head the server sent
    app.set_layer(2)
    app.pick_head("head 5 · kv 1")  # a head rebuilt in the page from its difference
    app.page.wait_for_function("() => document.querySelector('#pipeline-plot').dataset.head === '5'")
    assert_drawn_as_built(app, run, 2, 5, style)
    assert not app.problems()


def test_a_pooled_layer_and_its_other_heads_are_drawn_as_built(browser, tmp_path, tiny_tokenizer):
    """700 tokens: every map pooled into blocks (8-bit codes), the other heads asked for once drawn."""
    from explorer.app.policy import Policy
    from explorer.app.workspace import Workspace
    from tests.conftest import make_hf_checkpoint, served

    make_hf_checkpoint(tmp_path, tiny_tokenizer, "llama", max_position_embeddings=1024)
    workspace = Workspace(tmp_path, device="cpu", policy=Policy())
    prompt = "To be, or not to be, that is the question. " * 30
    run = workspace.run("", prompt)
    assert 512 < run.n_tokens <= 1024
    with served(workspace) as url:
        context = browser.new_context(**CONTEXT)
        try:
            app = AppPage(context.new_page(), url).open()
            app.run(prompt)
            assert_drawn_as_built(app, run, 0, 0, views.MapStyle())
            app.page.wait_for_function(
                "() => document.querySelector('#pipeline-plot').dataset.held.split(',').includes('5')",
                timeout=60_000,
            )
            app.pick_head("head 5 · kv 1")
            app.page.wait_for_function("() => document.querySelector('#pipeline-plot').dataset.head === '5'")
            assert_drawn_as_built(app, run, 0, 5, views.MapStyle())
            assert not app.problems()
        finally:
            context.close()


KEPT = "(want) => document.querySelector('#pipeline-plot').dataset.kept === want"
# Each plot of the layer view Plotly draws on screen from now on, and each swapped in, drawn ahead
# off screen, by its card.
JS_COUNT_DRAWS = """() => {
  window.__draws = [];
  const seen = new WeakSet();
  const card = (gd) => gd.closest('[id]')?.id;
  const hook = (gd) => {
    if (seen.has(gd) || typeof gd.on !== 'function') return;
    seen.add(gd);
    gd.on('plotly_afterplot', () => gd.closest('.layers-ahead') || window.__draws.push(['drawn', card(gd)]));
  };
  const view = document.querySelector('.layer-view-root');
  view.querySelectorAll('.js-plotly-plot').forEach(hook);
  new MutationObserver(() => view.querySelectorAll('.js-plotly-plot').forEach(hook))
    .observe(view, { childList: true, subtree: true, attributes: true, attributeFilter: ['class'] });
  view.addEventListener('plot-shown', (event) => window.__draws.push(['shown', card(event.target)]), true);
}"""


def test_a_step_to_a_layer_beside_the_one_drawn_draws_what_the_view_keeps(
    app, browser_workspace, monkeypatch
):
    """Once a layer is drawn and the page is idle, the view asks for the layers beside it, keeps them
    and draws them ahead, off screen: a step to one swaps its plots in, as built, with no switch on the
    server and nothing drawn; the layer's views on other tabs follow it when their tab opens; a layer
    it does not keep it asks the server for (`layer_pack`), its views on other tabs again following it
    when their tab opens."""
    from browser_support import JS_VIEW_SETTLED

    from explorer.app.ui import events

    app.run(SHORT)
    app.page.wait_for_function(KEPT, arg="0,1", timeout=60_000)
    app.page.wait_for_function(JS_VIEW_SETTLED, timeout=60_000)  # layer 1 drawn ahead
    run, switched, layer_figures = browser_workspace.run("", SHORT), [], views.layer_figures
    counted = lambda r, layer, *a: switched.append(layer) or layer_figures(r, layer, *a)  # noqa: E731
    monkeypatch.setattr(events.views, "layer_figures", counted)
    app.page.evaluate(JS_COUNT_DRAWS)
    app.set_layer(1)
    swapped_in = [["shown", "pipeline-plot"], ["shown", "all-heads-plot"]]  # and nothing drawn
    assert app.page.evaluate("() => window.__draws") == swapped_in
    assert_drawn_as_built(app, run, 1, 0, views.MapStyle())
    assert app.page.evaluate("() => document.querySelector('#pipeline-plot').dataset.layer") == "1"
    app.page.wait_for_function(KEPT, arg="0,1,2", timeout=60_000)  # its own neighbours asked for
    assert switched == []
    app.remember_plots()
    app.page.get_by_role("tab", name="GQA", exact=True).click()
    app.wait_redrawn(["similarity-plot"])  # what it held, then the layer it follows
    app.page.wait_for_function(
        "() => document.querySelector('#similarity-plot .gtitle')?.textContent.startsWith('Layer 1:')"
    )
    assert switched == [1]
    app.page.get_by_role("tab", name="Attention", exact=True).click()
    app.wait_view_settled()
    posts = []
    app.page.on("request", lambda request: posts.append(request) if request.method == "POST" else None)
    app.set_layer(3)  # two layers on: not kept
    assert_drawn_as_built(app, run, 3, 0, views.MapStyle())
    # one request: the layer's pack (what the view asks for once it is drawn and idle aside)
    asks = [(r.url.rsplit("/gradio_api/", 1)[-1], json.loads(r.post_data or "{}")) for r in posts]
    tab = {"value": "Attention", "index": 0}  # the tab's own select events, which may come in late
    asks = [(url, ask) for url, ask in asks if ask.get("event_data") != tab]
    not_idle = [(url, ask.get("data")) for url, ask in asks if ask.get("data", {}).get("part") not in IDLE]
    assert len(not_idle) == 1 and not_idle[0][0].startswith("component_server"), not_idle
    assert not_idle[0][1]["part"] == "layer" and not_idle[0][1]["layer"] == 3
    assert switched == [1]  # the GQA tab is not on screen
    app.remember_plots()
    app.page.get_by_role("tab", name="GQA", exact=True).click()
    app.wait_redrawn(["similarity-plot"])
    assert switched == [1, 3]
    assert not app.problems()


def test_past_the_budget_a_drawn_layers_neighbours_are_kept_and_a_step_to_one_computes_no_pass(
    browser, tmp_path, tiny_tokenizer, monkeypatch
):
    """With a view budget of a tenth of a layer's maps, the view asks, once its layer is drawn and its
    other heads are in, for the layers beside it; the server makes each one's pass once, and a step to
    one draws it from what the view keeps, as built, then asks for its other heads (answered from the
    pass kept) and its own neighbours."""
    from explorer.app.policy import Policy
    from explorer.app.workspace import Workspace
    from explorer.views import attention as view_attention
    from explorer.views import pooled
    from tests.conftest import make_hf_checkpoint, served

    make_hf_checkpoint(tmp_path, tiny_tokenizer, "llama", max_position_embeddings=1024)
    workspace = Workspace(tmp_path, device="cpu", policy=Policy())
    prompt = "To be, or not to be, that is the question. " * 30
    run = workspace.run("", prompt)
    monkeypatch.setattr(view_attention, "VIEW_MAP_BYTES", run.config.n_heads * run.n_tokens**2 * 4 // 10)
    assert not views.maps_fit(run) and run.config.n_layers == 3
    passes, layer_pass = [], pooled.layer_pass
    monkeypatch.setattr(
        pooled, "layer_pass", lambda r, layer, *a, **k: passes.append(layer) or layer_pass(r, layer, *a, **k)
    )
    with served(workspace) as url:
        context = browser.new_context(**CONTEXT)
        try:
            app = AppPage(context.new_page(), url).open()
            app.run(prompt)
            app.page.wait_for_function(KEPT, arg="0,1", timeout=60_000)
            assert passes == [0, 1]  # the layer drawn, then its one neighbour
            app.set_layer(1)
            assert_drawn_as_built(app, run, 1, 0, views.MapStyle())
            app.page.wait_for_function(KEPT, arg="0,1,2", timeout=60_000)
            held = "() => document.querySelector('#pipeline-plot').dataset.held.split(',').length > 1"
            app.page.wait_for_function(held, timeout=60_000)
            assert passes == [0, 1, 2]  # layer 1 drawn and its heads answered from what was kept
            assert not app.problems()
        finally:
            context.close()

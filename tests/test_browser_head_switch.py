"""A head switch in Chromium is the page's alone: every head's pipeline came with the layer (or, for a
long prompt, followed it), so picking a head sends no request, and draws the pipeline the server would
have drawn, cell for cell and hover for hover."""

from __future__ import annotations

import pytest
from browser_support import CONTEXT, AppPage

pytestmark = pytest.mark.browser

SHORT = "To be, or not to be, that is the question"  # exact float32 maps
LONG = " ".join(["Now is the winter of our discontent made glorious summer by this sun of York;"] * 9)
# Every heatmap of the pipeline as drawn: its values, colour range, colour bar ticks and hover template.
JS_DRAWN_MAPS = """() => {
    const gd = document.querySelector('#pipeline-plot .js-plotly-plot');
    const plain = (v) => (v && typeof v === 'object' ? Array.from(v, plain) : Number.isNaN(v) ? 'NaN' : v);
    return {
        title: gd._fullLayout.title.text,
        filename: document.querySelector('#pipeline-plot').dataset.download,
        maps: gd._fullData.filter((t) => t.type === 'heatmap').map((t) => ({
            z: plain(t.z), zmin: t.zmin, zmax: t.zmax, ticks: (t.colorbar && t.colorbar.tickvals) || null,
            hover: t.hovertemplate, custom: t.customdata ? plain(t.customdata) : null,
        })),
    };
}"""
JS_HOVERS = """async ([panels, cells]) => {
    const gd = document.querySelector('#pipeline-plot .js-plotly-plot');
    const labels = [];
    for (const panel of panels) {
        for (const [query, key] of cells) {
            const n = panel === 1 ? '' : panel;
            window.Plotly.Fx.hover(gd, { xval: key, yval: query }, `x${n}y${n}`);
            await new Promise((resolve) => setTimeout(resolve, 80)); // Plotly hovers once each 50 ms
            const shown = gd.querySelectorAll('.hoverlayer .hovertext');
            labels.push([...shown].map((e) => e.textContent).join('|'));
        }
    }
    window.Plotly.Fx.unhover(gd);
    return labels;
}"""
CELLS = [(0, 0), (3, 1), (7, 7), (9, 2)]  # (query, key) hovered
PANELS = (1, 2, 4, 5)  # Q·Kᵀ, scaled, masked, softmax


def hovers(app) -> list[str]:
    """The hover label of each of CELLS on each of PANELS, as Plotly draws it for that cell (its own
    hover call, not the mouse: at 150 tokens a cell is about a pixel)."""
    return app.page.evaluate(JS_HOVERS, [PANELS, CELLS])


def work_asked_for(app) -> list:
    """The requests the page sends from now on that ask the server for work: every event is a POST (a
    queue join, or a call that skips the queue); a GET of the queue's stream, which the page may open
    again for an event sent earlier, asks for none. What the layer view asks for on its own once a
    layer is drawn (a long prompt's other heads, the layers beside it) is in before."""
    app.wait_view_settled()
    asked = []
    app.page.on("request", lambda request: asked.append(request) if request.method == "POST" else None)
    return asked


@pytest.mark.parametrize(
    ("prompt", "weighted"), [(SHORT, False), (LONG, False), (SHORT, True)], ids=["exact", "8-bit", "weighted"]
)
def test_a_head_switch_sends_no_request_and_draws_what_the_server_would(
    app, browser_workspace, prompt, weighted
):
    config = browser_workspace.explorer("").config
    head = config.n_heads - 2
    label = f"head {head} · kv {head // (config.n_heads // config.n_kv_heads)}"
    app.run(prompt)
    if weighted:  # hover gives α and ‖α·v·W_O‖ too, rebuilt in the page from each head's vectors
        app.remember_plots()
        app.page.locator("#weighted-maps input").check()
        app.wait_redrawn(["pipeline-plot"])
    app.set_layer(2)
    asked = work_asked_for(app)
    app.pick_head(label)
    app.wait_settled()  # a request the pick needed would have been made before it was drawn
    assert not asked, [request.url for request in asked]
    in_page, hovered = app.page.evaluate(JS_DRAWN_MAPS), hovers(app)
    assert all(hovered) and len(set(hovered)) == len(hovered), hovered  # each cell its own label
    assert weighted == any("‖α·v·W_O‖" in label for label in hovered), hovered
    assert in_page["title"].startswith(f"Layer 2 · {label}")
    assert in_page["filename"].endswith(f"layer2-head{head}-pipeline")

    app.set_layer(1)  # and back: drawn again, from the layers the view keeps
    app.set_layer(2)
    from_server = app.page.evaluate(JS_DRAWN_MAPS)
    assert from_server["title"] == in_page["title"]
    assert from_server == in_page
    assert hovers(app) == hovered
    assert not app.problems()


# A press on an option of the head picker, or Enter on the option the keys reached, with Gradio's own
# handling of it held back (propagation stopped before it reaches the picker): only the page's listener
# hears it.
JS_PRESS_UNHEARD = """([kind, label]) => {
  const picker = document.querySelector('#head-picker');
  const option = [...picker.querySelectorAll('li.item')].find((li) => li.ariaLabel === label);
  const stop = (event) => event.stopPropagation();
  picker.addEventListener(kind, stop, { capture: true, once: true });
  if (kind === 'mousedown') {
    option.dispatchEvent(new MouseEvent('mousedown', { bubbles: true, button: 0 }));
  } else {
    for (const li of picker.querySelectorAll('li.item.active')) li.classList.remove('active');
    option.classList.add('active');
    const enter = new KeyboardEvent('keydown', { key: 'Enter', bubbles: true });
    picker.querySelector('input').dispatchEvent(enter);
  }
}"""


@pytest.mark.parametrize("kind", ["mousedown", "keydown"])
def test_a_head_picked_in_the_picker_reaches_the_view_without_gradios_event(app, browser_workspace, kind):
    """The press on an option (or Enter) is the layer view's at once, not a round through Gradio's
    select event: with Gradio's handling held back the view still draws the head, and the picker,
    which Gradio updates, still shows the head before."""
    config = browser_workspace.explorer("").config
    head = config.n_heads - 3
    label = f"head {head} · kv {head // (config.n_heads // config.n_kv_heads)}"
    app.run(SHORT)
    app.wait_view_settled()
    before = app.page.locator("#head-picker input").input_value()
    app.page.locator("#head-picker input").click()
    app.page.locator("#head-picker").get_by_role("option", name=label, exact=True).wait_for()
    app.remember_plots()
    app.page.evaluate(JS_PRESS_UNHEARD, [kind, label])
    app.wait_redrawn(["pipeline-plot"])
    assert app.page.evaluate("() => document.querySelector('#pipeline-plot').dataset.head") == str(head)
    assert app.page.evaluate(JS_DRAWN_MAPS)["title"].startswith(f"Layer 0 · {label}")
    assert app.page.locator("#head-picker input").input_value() == before
    assert not app.problems()


def test_a_thumbnail_of_the_layer_on_screen_is_opened_in_the_page(app):
    app.run(SHORT)
    asked = work_asked_for(app)
    app.remember_plots()
    app.click_cell("all-heads-plot", 4, 2, 1)  # head 3's thumbnail
    app.wait_redrawn(["pipeline-plot"])
    app.wait_settled()
    assert not asked, [request.url for request in asked]
    assert app.title("pipeline-plot").startswith("Layer 0 · head 3 ")
    assert app.page.locator("#head-picker input").input_value().startswith("head 3 ")
    app.open_tab("RoPE")  # the views that follow the head on other tabs are drawn when opened
    app.page.wait_for_function(
        "() => document.querySelector('#rope-rotation-plot .js-plotly-plot')"
        "?.dataset.download.includes('head3')"
    )
    assert not app.problems()


def test_a_long_prompts_other_heads_follow_the_layer_and_then_switch_in_the_page(
    browser, tmp_path, tiny_tokenizer
):
    """700 tokens, pooled maps: the layer's update carries the shown head alone, the page then asks
    for the others, and once they are in, a pick is drawn in the page as the server would draw it."""
    from explorer.app.policy import Policy
    from explorer.app.workspace import Workspace
    from tests.conftest import make_hf_checkpoint, served

    make_hf_checkpoint(tmp_path, tiny_tokenizer, "llama", max_position_embeddings=1024)
    workspace = Workspace(tmp_path, device="cpu", policy=Policy())
    prompt = "To be, or not to be, that is the question. " * 30
    assert 512 < workspace.run("", prompt).n_tokens <= 1024
    with served(workspace) as url:
        context = browser.new_context(**CONTEXT)
        try:
            app = AppPage(context.new_page(), url).open()
            app.run(prompt)
            app.set_layer(2)
            app.page.wait_for_function(
                "() => document.querySelector('#pipeline-plot').dataset.held.split(',').includes('5')",
                timeout=60_000,
            )
            asked = work_asked_for(app)
            app.pick_head("head 5 · kv 1")
            app.wait_settled()
            assert not asked, [request.url for request in asked]
            in_page = app.page.evaluate(JS_DRAWN_MAPS)
            assert in_page["title"].startswith("Layer 2 · head 5 · kv 1")
            app.set_layer(1)  # and back: layer 1 kept with its head 0 alone, so from the server
            app.set_layer(2)
            assert app.page.evaluate(JS_DRAWN_MAPS) == in_page
            assert not app.problems()
        finally:
            context.close()

"""Layout at a desktop width, in Chromium: no title, tick label or colour bar covers another or is cut
by the figure's edge, on the page at 1,400 px and in the PNG the page's button exports (1,600 px wide);
a sink head's first column stands apart from its thumbnail's frame."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from browser_support import CONTEXT, TABS, AppPage, settle
from PIL import Image

from explorer import figures
from explorer.app.examples import LONG_PASSAGE, SHAKESPEARE_LINE
from explorer.figures.common import group_colour

pytestmark = pytest.mark.browser

WIDE = {"width": 1400, "height": 900}
# Long words: several tokens each, one each in the bundled model's vocabulary ("NORTHUMBERLAND"),
# and the start of the app's long example (~150 tokens: labels thinned). The third repeats no token:
# the overview then titles its induction panel over two lines, under the figure's title.
PROMPTS = [
    "The lighthouse keeper watched the lighthouse beam sweep across the harbour",
    SHAKESPEARE_LINE,
    "NORTHUMBERLAND to BOLINGBROKE: the gentlewoman of Gloucester will understand this banishment",
    LONG_PASSAGE[:600],
]
ATTENTION_PLOTS = [*TABS["Attention"], "zoom-plot"]
# Every title, tick label and colour bar (its bar, its tick labels, its title) of a figure as drawn,
# on the page or in an SVG made from it: each pair that intersects by more than a pixel each way, each
# one that crosses a frame's outline (the thumbnails'), and each one the figure's edge cuts.
JS_LAYOUT_PROBLEMS = """(root) => {
  const shown = (e) => {
    for (; e && e !== root; e = e.parentElement) {
      const style = getComputedStyle(e);
      if (style.visibility === "hidden" || style.display === "none" || style.opacity === "0") return false;
    }
    return true;
  };
  const items = [];
  for (const text of root.querySelectorAll("text"))
    if (text.textContent.trim() && !text.closest(".hoverlayer") && shown(text))
      items.push([`“${text.textContent}”`, text.getBoundingClientRect()]);
  root.querySelectorAll(".colorbar .cbfills").forEach((bar, i) => {
    if (shown(bar)) items.push([`colour bar ${i + 1}`, bar.getBoundingClientRect()]);
  });
  const boxes = items.filter(([, box]) => box.width > 0 && box.height > 0);
  const problems = [];
  for (let i = 0; i < boxes.length; i++)
    for (let j = i + 1; j < boxes.length; j++) {
      const [a, p] = boxes[i], [b, q] = boxes[j];
      const w = Math.min(p.right, q.right) - Math.max(p.left, q.left);
      const h = Math.min(p.bottom, q.bottom) - Math.max(p.top, q.top);
      if (w > 1 && h > 1) problems.push(`${a} ⨯ ${b}`);
    }
  const frames = [...root.querySelectorAll(".shapelayer path")]
    .filter(shown)
    .map((path) => path.getBoundingClientRect())
    .filter((box) => box.width > 2 && box.height > 2); // a rectangle's outline, not a line
  for (const [name, box] of boxes) {
    for (const frame of frames) {
      const w = Math.min(box.right, frame.right) - Math.max(box.left, frame.left);
      const h = Math.min(box.bottom, frame.bottom) - Math.max(box.top, frame.top);
      const inside = box.left >= frame.left && box.right <= frame.right && box.top >= frame.top &&
        box.bottom <= frame.bottom;
      if (w > 1 && h > 1 && !inside) problems.push(`${name} crosses a frame`);
    }
  }
  const edge = root.querySelector("svg").getBoundingClientRect();
  for (const [name, box] of boxes)
    if (box.left < edge.left - 1 || box.right > edge.right + 1 || box.top < edge.top - 1 ||
        box.bottom > edge.bottom + 1)
      problems.push(`${name} cut by the edge`);
  return problems;
}"""
# The plot as its modebar's SVG download exports it (at publication size; the PNG is this SVG
# rasterised), put on the page to be measured.
JS_DOWNLOAD_SVG = (
    """(id) => document.querySelector(`#${id} .modebar-btn[data-title^='Download as SVG']`).click()"""
)
JS_SHOW_EXPORT = """(svg) => {
  const holder = document.createElement("div");
  holder.id = "exported-figure";
  holder.style.cssText = "position: absolute; left: 0; top: 0; z-index: 10000; background: white;";
  holder.innerHTML = svg;
  document.body.appendChild(holder);
}"""


@pytest.fixture(scope="module")
def wide(browser, app_url):
    """One tab at 1,400 × 900 with the zoom window open."""
    context = browser.new_context(**{**CONTEXT, "viewport": WIDE})
    app = AppPage(context.new_page(), app_url).open()
    app.remember_plots()
    app.page.get_by_text("Zoom: exact values", exact=False).click()
    app.wait_redrawn(["zoom-plot"])
    yield app
    context.close()


DRAWN_AS_OPENED = ("Lens", "Flow")  # tabs computed as they open (closed, they keep the last figures)
# A tab opened draws the plots it held back while hidden and lays out again at its card's width any
# drawn while it was hidden (page.js: a click, then a draw, each a task later, then Plotly's resize):
# the labels are measured once no resize is pending.
JS_TASKS_LATER = "async () => { for (let i = 0; i < 3; i++) await new Promise((r) => setTimeout(r, 0)); }"
JS_SETTLED = """(ids) => ids.every((id) => {
  const gd = document.querySelector(`#${id} .js-plotly-plot`);
  return gd && gd._fullLayout && !gd._resolveResize;
})"""


def open_tab(app: AppPage, tab: str) -> None:
    """Open a tab and wait until its plots are drawn for the last run, at their cards' width: those the
    tab computes as it opens redrawn (the last run's figures stay drawn until then), and every event
    the opening started answered."""
    app.remember_plots()
    app.open_tab(tab)
    if tab in DRAWN_AS_OPENED:
        app.wait_redrawn(TABS[tab])
    settle(app, quiet_s=0.5)
    app.page.evaluate(JS_TASKS_LATER)
    app.page.wait_for_function(JS_SETTLED, arg=TABS[tab], polling=50)


def layout_problems(app: AppPage, plot: str) -> list[str]:
    """What overlaps or is cut in a plot on the page, then in its export at publication size."""
    page = app.page
    page.locator(f"#{plot}").scroll_into_view_if_needed()
    page.wait_for_function(JS_SETTLED, arg=[plot], polling=50)
    on_page = page.evaluate(JS_LAYOUT_PROBLEMS, page.locator(f"#{plot} .js-plotly-plot").element_handle())
    with page.expect_download() as download:
        page.evaluate(JS_DOWNLOAD_SVG, plot)
    page.evaluate(JS_SHOW_EXPORT, Path(download.value.path()).read_text(encoding="utf-8"))
    try:
        exported = page.evaluate(JS_LAYOUT_PROBLEMS, page.locator("#exported-figure").element_handle())
    finally:
        page.evaluate("() => document.querySelector('#exported-figure').remove()")
    return on_page + [f"{problem} (export)" for problem in exported]


def set_log_colours(app: AppPage, on: bool) -> None:
    box = app.page.locator("#log-colours input")
    if box.is_checked() == on:
        return
    app.remember_plots()
    box.set_checked(on)
    app.wait_redrawn([*TABS["Attention"], "zoom-plot"])  # the open zoom restyled with the pipeline


@pytest.mark.parametrize("prompt", PROMPTS)
def test_at_1400_px_no_title_tick_label_or_colour_bar_covers_another_or_is_cut(wide, prompt):
    set_log_colours(wide, False)
    wide.run(prompt)
    wide.wait_redrawn(["zoom-plot"])
    problems = {}
    for tab, plots in TABS.items():
        if not plots:
            continue
        open_tab(wide, tab)
        for plot in plots + (["zoom-plot"] if tab == "Attention" else []):
            problems[plot] = layout_problems(wide, plot)
    open_tab(wide, "Attention")
    set_log_colours(wide, True)
    for plot in ATTENTION_PLOTS:
        problems[f"{plot}, log colours"] = layout_problems(wide, plot)
    found = [f"{plot}: {problem}" for plot, listed in problems.items() for problem in listed]
    assert not found, "\n".join(found)


# A figure drawn on the page, above it, as wide as `width`; the first panel's left edge of cells, the
# centre of its first column and the middle of its rows, in pixels from the figure's top left.
JS_DRAW_FIGURE = """async ([json, width]) => {
  const figure = JSON.parse(json);
  const gd = document.createElement("div");
  gd.id = "drawn-figure";
  gd.style.cssText = `position: absolute; left: 0; top: 0; width: ${width}px; z-index: 10000;`;
  document.body.appendChild(gd);
  await window.Plotly.newPlot(gd, figure.data, figure.layout, { staticPlot: true });
  const x = gd._fullLayout.xaxis, y = gd._fullLayout.yaxis, rows = y.range[0] + 0.5;
  return [x._offset + x.d2p(-0.5), x._offset + x.d2p(0), y._offset + y.d2p(rows / 2)];
}"""
SINK_COLOUR = (8, 48, 107)  # p = 1 on the probability scale
WHITE = (255, 255, 255)


def near(pixel: np.ndarray, colour: tuple[int, int, int], levels: int = 24) -> bool:
    return bool(np.abs(pixel.astype(int) - colour).max() <= levels)


def test_a_sink_heads_first_column_is_drawn_apart_from_its_thumbnail_frame(wide):
    """Every head attends to key 0 alone (a perfect sink, as SmolLM2's layer 18 head 8), in SmolLM2's
    grid (9 heads, 3 kv groups: two rows): across a thumbnail's middle row, from outside in, come its
    frame, white, then column 0 in the sink's colour (on the cells' edge, the frame covered the column
    and the two read as one thick frame); and no title crosses a frame."""
    n_tokens, kv_head = 60, np.repeat(np.arange(3), 3)
    probs = np.zeros((len(kv_head), n_tokens, n_tokens), dtype=np.float32)
    probs[:, :, 0] = 1
    fig = figures.all_heads_figure([f"t{i}" for i in range(n_tokens)], probs, kv_head, "sinks")
    frame = group_colour(0)
    frame_rgb = tuple(int(frame[i : i + 2], 16) for i in (1, 3, 5))
    page = wide.page
    left, column, middle = page.evaluate(JS_DRAW_FIGURE, [figures.to_json(fig), 1216])
    try:
        drawn = page.locator("#drawn-figure")
        problems = page.evaluate(JS_LAYOUT_PROBLEMS, drawn.element_handle())
        shot = drawn.screenshot(animations="disabled")
    finally:
        page.evaluate("() => document.querySelector('#drawn-figure').remove()")
    assert problems == []
    row = np.asarray(Image.open(io.BytesIO(shot)).convert("RGB"))[round(middle)]
    assert near(row[int(column)], SINK_COLOUR), f"column 0 is {row[int(column)]}, not the sink's colour"
    scan = row[int(left) - 12 : int(column) + 1]
    kinds = [
        "frame"
        if near(p, frame_rgb)
        else "white"
        if near(p, WHITE)
        else "sink"
        if near(p, SINK_COLOUR)
        else "other"
        for p in scan
    ]
    clear = [kind for kind in kinds if kind != "other"]  # "other": an edge's anti-aliased blend
    runs = [kind for i, kind in enumerate(clear) if i == 0 or clear[i - 1] != kind]
    assert runs[-3:] == ["frame", "white", "sink"], kinds


# How many times each plot (by its card's id) is laid out from now on: Plotly's afterplot events, on
# the plots there now and on those Gradio mounts for new figures.
JS_COUNT_LAYOUTS = """() => {
  window.__layouts = {};
  const hook = (gd) => {
    if (gd.__counted || typeof gd.on !== "function") return;
    gd.__counted = true;
    gd.on("plotly_afterplot", () => {
      if (gd.closest(".layers-ahead")) return; // a layer drawn ahead, off screen
      const id = gd.closest(".block[id]").id;
      window.__layouts[id] = (window.__layouts[id] || 0) + 1;
    });
  };
  document.querySelectorAll(".js-plotly-plot").forEach(hook);
  new MutationObserver(() => document.querySelectorAll(".js-plotly-plot").forEach(hook))
    .observe(document.body, { childList: true, subtree: true, attributes: true, attributeFilter: ["class"] });
}"""


def test_a_layer_switch_lays_each_plot_out_once_and_a_narrower_window_again(browser, app_url):
    """Gradio asks for every new plot to be resized just after drawing it, and Plotly laid it out again
    (some 25–35 ms for the pipeline): now a plot drawn at its card's width is left as it is, and one
    whose card changes width is laid out at the new width."""
    context = browser.new_context(**{**CONTEXT, "viewport": WIDE})
    try:
        app = AppPage(context.new_page(), app_url).open()
        app.run(PROMPTS[0])
        app.page.evaluate(JS_COUNT_LAYOUTS)
        app.set_layer(2)
        app.page.wait_for_timeout(800)  # Plotly's resize waits 100 ms, then lays the plot out
        assert app.page.evaluate("() => window.__layouts") == {"pipeline-plot": 1, "all-heads-plot": 1}
        app.page.set_viewport_size({"width": 1000, "height": 900})
        widths = "(id) => { const gd = document.querySelector(`#${id} .js-plotly-plot`); "
        widths += "return [gd._fullLayout.width, gd.clientWidth]; }"
        for plot in TABS["Attention"]:
            app.page.wait_for_function(
                f"(id) => {{ const [a, b] = ({widths})(id); return Math.abs(a - b) <= 1; }}", arg=plot
            )
            laid_out, card = app.page.evaluate(widths, plot)
            assert card < 1000 and abs(laid_out - card) <= 1
        assert not app.problems()
    finally:
        context.close()

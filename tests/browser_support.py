"""Driving the app in Debian's Chromium as a person would, and comparing screenshots with baselines.

`AppPage` wraps a Playwright page of the running app: type a prompt, press Run, move the layer, pick a
head, open a tab, hover a heatmap cell, and read back what is drawn (tick labels, hover text, toasts).
It never sleeps for a fixed time: it waits on the plot elements Plotly draws.

`match_baseline` compares a screenshot with its baseline under tests/screenshots/; a failing comparison
writes the actual image and a diff next to the test output, in tests/browser-output/.
`UPDATE_SCREENSHOTS=1 python -m pytest tests/test_browser.py` rewrites the baselines.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from PIL import Image
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import Locator, Page

TESTS = Path(__file__).resolve().parent
BASELINES = TESTS / "screenshots"
OUTPUT = TESTS / "browser-output"

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
]
# Fixed so screenshots are the same from run to run: viewport, light theme, scale 1, no motion.
CONTEXT = dict(
    viewport={"width": 1200, "height": 900},
    device_scale_factor=1,
    color_scheme="light",
    reduced_motion="reduce",
    locale="en-US",
    timezone_id="UTC",
)
DRAW_TIMEOUT_MS = 60_000  # a view is drawn within this, or it never finishes loading

# A pixel differs when one of its channels moves by more than PIXEL_LEVELS (of 255); a screenshot
# matches its baseline while at most MAX_DIFFERING of its pixels differ.
PIXEL_LEVELS = 16
MAX_DIFFERING = 0.005
# Hidden in every screenshot: Plotly's toolbar and hover labels, which follow the mouse.
SCREENSHOT_CSS = ".modebar-container, .hoverlayer { visibility: hidden !important; }"

TABS = {  # tab name: the elem_ids of its plots
    "Attention": ["pipeline-plot", "all-heads-plot"],
    "RoPE": ["rope-angles-plot", "rope-wavelengths-plot", "rope-rotation-plot", "rope-split-plot"],
    "GQA": ["gqa-plot", "similarity-plot", "kv-cache-plot"],
    "Faithfulness": ["faithfulness-plot"],
    "Overview": ["overview-plot", "next-tokens-plot"],
    "Intervene": [],  # drawn on request (Ablate, Patch, an example): tests/test_browser_intervene.py
    "Lens": ["lens-plot", "lens-rank-plot", "lens-attribution-plot"],  # drawn when the tab opens
    "Flow": ["flow-plot", "rollout-plot"],  # drawn when the tab opens
}
# The Generate tab's plots, drawn once a generation streams (not by Run, so not among TABS' views).
GENERATE_PLOTS = ["generation-plot", "candidates-plot", "generation-kv-plot"]

# Plotly's graph div inside a gr.Plot, and how many data points its traces hold once drawn
# (finite cells of a heatmap, points of a scatter, bars of a bar chart).
JS_POINTS = """(id) => {
    const gd = document.querySelector(`#${id} .js-plotly-plot`);
    if (!gd || !gd._fullLayout || !Array.isArray(gd.calcdata)) return null;
    const finite = (v) => typeof v === "number" && Number.isFinite(v);
    let points = 0;
    for (const trace of gd.calcdata) {
        if (!trace.length || trace[0].trace.visible !== true) continue;
        if (trace[0].trace.type === "heatmap") {
            for (const row of trace[0].z || []) for (const v of row) points += finite(v);
        } else {
            points += trace.filter((p) => finite(p.x) || finite(p.y) || finite(p.s)).length;
        }
    }
    return points;
}"""
# The layer view's own asks answered (a long prompt's other heads, the layers beside it); settled once
# it has drawn, those are answered and the layers beside it are drawn ahead.
JS_VIEW = "document.querySelector('#pipeline-plot')?.dataset"
JS_VIEW_ANSWERED = f"() => !['asking', 'fetching'].some((flag) => {JS_VIEW}?.[flag] === '1')"
JS_VIEW_SETTLED = f"() => Boolean({JS_VIEW}?.drawn) && ({JS_VIEW_ANSWERED})() && {JS_VIEW}.ahead !== '1'"
# No event of the page's pending (Gradio marks each output of an event under way `.pending`).
JS_PAGE_IDLE = "() => document.querySelectorAll('.pending').length === 0"
# Remember every graph div on screen (and the data it holds) so a later redraw can be told from what
# was there (a layer drawn ahead, off screen, that a step swaps in is new to the page).
JS_REMEMBER_PLOTS = """() => {
    window.__seenPlots = new WeakMap();
    for (const gd of document.querySelectorAll(".js-plotly-plot")) {
        if (!gd.closest(".layers-ahead")) window.__seenPlots.set(gd, gd.data);
    }
}"""
JS_REDRAWN = """(id) => {
    const gd = document.querySelector(`#${id} .js-plotly-plot`);
    if (!gd || !gd._fullLayout || !Array.isArray(gd.calcdata)) return false;
    return !window.__seenPlots || window.__seenPlots.get(gd) !== gd.data;
}"""
# A run's views are drawn: the token strip is the run's (not the one marked before it was asked for,
# JS_MARK_STRIP_OLD), and the pipeline drawn labels the same tokens (not an older prompt's figure, which
# a late redraw may still draw after the run was asked for).
JS_MARK_STRIP_OLD = "() => document.querySelector('#token-strip-content')?.setAttribute('data-old', '1')"
JS_RUN_DRAWN = """() => {
    const strip = document.querySelector('#token-strip-content');
    const gd = document.querySelector('#pipeline-plot .js-plotly-plot');
    if (!strip || strip.dataset.old || !gd || !gd._fullLayout) return false;
    const tokens = [...strip.querySelectorAll("span[title^='position']")].map((s) => s.lastChild.textContent);
    const alias = gd._fullLayout.xaxis.labelalias || {};
    const decode = document.createElement('textarea');
    const label = (i) => {
        decode.innerHTML = String(alias[String(i)] ?? '');
        return decode.value.split('\u2063')[0];
    };
    const same = tokens.every((token, i) => label(i) === token);
    return tokens.length > 0 && same && !(String(tokens.length) in alias);
}"""
# The page position of cell (row, col) of the heatmap on axes (x, y): Plotly's own data-to-pixel maps.
# Elements a hostile prompt would have created, had it reached the page as HTML.
JS_INJECTED = """() => [
    ...document.querySelectorAll('img[src="x"]'),
    ...[...document.scripts].filter((s) => s.textContent.includes("alert(")),
    ...[...document.querySelectorAll("b")].filter((b) => b.textContent === "bold"),
].map((e) => e.outerHTML)"""
# Every drawn text of a figure (ticks, titles, annotations, legend, colour bars), as shown, and each
# pair whose boxes overlap by more than a pixel each way.
JS_OVERLAPS = """(id) => {
  const gd = document.querySelector(`#${id} .js-plotly-plot`);
  const shown = (t) => {
    for (let e = t; e && e !== gd; e = e.parentElement) {
      const s = getComputedStyle(e);
      if (s.visibility === "hidden" || s.display === "none" || s.opacity === "0") return false;
    }
    return true;
  };
  const items = [...gd.querySelectorAll("text")]
    .filter((t) => t.textContent.trim() && !t.closest(".hoverlayer") && shown(t))
    .map((t) => [t.textContent, t.getBoundingClientRect()])
    .filter(([, b]) => b.width > 0 && b.height > 0);
  const overlaps = [];
  for (let i = 0; i < items.length; i++)
    for (let j = i + 1; j < items.length; j++) {
      const [a, p] = items[i], [b, q] = items[j];
      const w = Math.min(p.right, q.right) - Math.max(p.left, q.left);
      const h = Math.min(p.bottom, q.bottom) - Math.max(p.top, q.top);
      if (w > 1 && h > 1) overlaps.push(`${a} ⨯ ${b}`);
    }
  return overlaps;
}"""
# Installed before the app loads: every toast the page ever shows, even one that has faded since.
JS_RECORD_TOASTS = """
window.__toasts = [];
new MutationObserver((mutations) => {
    for (const m of mutations) for (const node of m.addedNodes) {
        if (!(node instanceof Element)) continue;
        const toasts = node.matches(".toast-body") ? [node] : node.querySelectorAll(".toast-body");
        for (const t of toasts) window.__toasts.push(t.innerText.split(/\\s+/).join(" ").trim());
    }
}).observe(document, { childList: true, subtree: true });
"""
JS_CELL_CENTRE = """([id, xaxis, yaxis, row, col]) => {
    const gd = document.querySelector(`#${id} .js-plotly-plot`);
    const xa = gd._fullLayout[xaxis], ya = gd._fullLayout[yaxis];
    const box = gd.querySelector(".main-svg").getBoundingClientRect();
    return [box.left + xa._offset + xa.d2p(col), box.top + ya._offset + ya.d2p(row)];
}"""


class NeverDrawn(AssertionError):
    """A plot did not appear in time: its view never finished loading."""


def close_settled(page: Page, timeout_ms: int = 20_000) -> None:
    """Close a page once its events and its layer view's own asks (other heads, neighbours) are
    answered, or after `timeout_ms`: every test's page comes from one address, which the server lets
    hold two requests of one kind and one expensive reading at a time, and a page closed with one in
    flight holds its place until the server sees the page gone."""
    answered = f"() => ({JS_PAGE_IDLE})() && ({JS_VIEW_ANSWERED})()"
    with contextlib.suppress(PlaywrightError):  # still asking after the timeout: closed as it is
        page.wait_for_function(answered, timeout=timeout_ms, polling=100)
    page.close()


QUIET_S = 1.0  # idle this long: the chain of events an action started has finished


def settle(app: AppPage, timeout_s: float = 60.0, quiet_s: float = QUIET_S) -> None:
    """Wait until no event has been pending for `quiet_s`, so nothing moves the page before a click
    (Gradio marks the outputs an event is computing as pending)."""
    deadline, quiet_since = time.monotonic() + timeout_s, None
    while time.monotonic() < deadline:
        if not app.page.evaluate(JS_PAGE_IDLE):
            quiet_since = None
        elif quiet_since is None:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= quiet_s:
            return
        time.sleep(0.1)
    raise AssertionError(f"the page was still busy after {timeout_s:.0f} s; toasts: {app.toasts()}")


STILL_MS = 300  # between two screenshots that must match for either to count


@dataclass
class AppPage:
    """One browser tab on the app, with what it has seen go wrong (dialogs, script errors)."""

    page: Page
    url: str
    dialogs: list[str] = field(default_factory=list)
    script_errors: list[str] = field(default_factory=list)

    def __post_init__(self):
        self.page.on("dialog", self._dismiss)
        self.page.on("pageerror", lambda error: self.script_errors.append(str(error)))
        self.page.add_init_script(JS_RECORD_TOASTS)

    def _dismiss(self, dialog) -> None:
        self.dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()

    def open(self) -> AppPage:
        """Load the page and wait for the first run (the prompt the page opens with) to be drawn."""
        self.page.goto(f"{self.url}?__theme=light")
        self.wait_drawn(TABS["Attention"])
        return self

    def wait_view_settled(self) -> None:
        """Wait until the layer view has what it asks for on its own once a layer is drawn and the page
        idle: a long prompt's other heads, the layers beside it."""
        self.page.wait_for_function(JS_VIEW_SETTLED, timeout=DRAW_TIMEOUT_MS, polling=100)

    def wait_settled(self) -> None:
        """Wait for the page's own signs that what an action started is done: the layer view settled
        (drawn, its asks answered, the layers beside it drawn ahead) and no event of the page pending.
        A request the action needed is sent before its effect is drawn, so once settled it was made."""
        self.wait_view_settled()
        self.page.wait_for_function(JS_PAGE_IDLE, timeout=DRAW_TIMEOUT_MS, polling=50)

    # --- acting as a person -------------------------------------------------------------------

    def run(self, prompt: str) -> None:
        """Type the prompt, press Run and wait until the attention views are redrawn for it: its token
        strip shown, and its own pipeline drawn (not a redraw of the one before)."""
        self.remember_plots()
        self.page.evaluate(JS_MARK_STRIP_OLD)
        self.type_prompt(prompt)
        self.press_run()
        self.wait_redrawn(TABS["Attention"])
        try:
            self.page.wait_for_function(JS_RUN_DRAWN, timeout=DRAW_TIMEOUT_MS, polling=100)
        except PlaywrightError:
            raise NeverDrawn(f"the run of {prompt[:40]!r} was never drawn; toasts: {self.toasts()}") from None

    def type_prompt(self, prompt: str) -> None:
        self.page.locator("#prompt textarea").fill(prompt)

    def press_run(self) -> None:
        self.page.locator("#run-button").click()

    def set_layer(self, layer: int) -> None:
        """Type the layer into the slider's number box and leave it, as a person would."""
        self.remember_plots()
        number = self.page.locator("#layer-slider input[type=number]")
        number.fill(str(layer))
        number.press("Tab")
        self.wait_redrawn(TABS["Attention"])

    def head_options(self) -> list[str]:
        """Open the head picker and read its choices (without choosing)."""
        self.page.locator("#head-picker input").click()
        options = self.page.locator("#head-picker").get_by_role("option")
        options.first.wait_for()
        labels = [re.sub(r"^✓\s*", "", text).strip() for text in options.all_inner_texts()]
        self.page.keyboard.press("Escape")
        return labels

    def pick_head(self, label: str) -> None:
        self.remember_plots()
        self.page.locator("#head-picker input").click()
        self.page.locator("#head-picker").get_by_role("option", name=label, exact=True).click()
        self.wait_redrawn(["pipeline-plot"])  # every head's map stays as it was

    def open_tab(self, name: str) -> None:
        """Open a view's tab and wait until each of its plots is drawn."""
        self.page.get_by_role("tab", name=name, exact=True).click()
        self.wait_drawn(TABS[name])

    def hover_cell(self, plot: str, panel: int, query: int, key: int) -> list[str]:
        """Hover heatmap cell (query, key) of a panel (1 = the first subplot) and read the hover
        label's lines."""
        x, y = self.cell_centre(plot, panel, query, key)
        self.page.mouse.move(x - 3, y - 3)
        self.page.mouse.move(x, y, steps=2)
        # Plotly hovers at most once every 50 ms (its HOVERMINTIME) and then for the last position: a
        # label read at once may still be that of the move's first step, a cell away on small cells.
        self.page.wait_for_timeout(150)
        label = self.page.locator(f"#{plot} .hoverlayer .hovertext").first
        label.wait_for()
        return label.locator("text.nums tspan.line").all_text_contents() or [label.text_content()]

    def click_cell(self, plot: str, panel: int, row: int, col: int) -> None:
        """Click heatmap cell (row, col) of a panel (1 = the first subplot)."""
        x, y = self.cell_centre(plot, panel, row, col)
        self.page.mouse.move(x, y, steps=2)
        self.page.mouse.click(x, y)

    def cell_centre(self, plot: str, panel: int, row: int, col: int) -> tuple[float, float]:
        """Where a panel's cell is on the page once the plot has stopped moving: a plot drawn while its
        tab was hidden is laid out again at its card's width when the tab opens, a moment after."""
        n = "" if panel == 1 else str(panel)
        self.page.locator(f"#{plot}").scroll_into_view_if_needed()
        where = None
        for _ in range(30):
            seen = self.page.evaluate(JS_CELL_CENTRE, [plot, f"xaxis{n}", f"yaxis{n}", row, col])
            if seen == where:
                break
            where = seen
            self.page.wait_for_timeout(100)
        return where

    def move_mouse_away(self) -> None:
        self.page.mouse.move(0, 0)

    # --- reading what is drawn ----------------------------------------------------------------

    def remember_plots(self) -> None:
        self.page.evaluate(JS_REMEMBER_PLOTS)

    def wait_drawn(self, plots: list[str]) -> None:
        self._wait_each(plots, f"({JS_POINTS})(id) !== null", "was never drawn")

    def wait_redrawn(self, plots: list[str], timeout_ms: int = DRAW_TIMEOUT_MS) -> None:
        self._wait_each(plots, f"({JS_REDRAWN})(id)", "was never redrawn", timeout_ms)

    def _wait_each(
        self, plots: list[str], condition: str, failure: str, timeout_ms: int = DRAW_TIMEOUT_MS
    ) -> None:
        for plot in plots:
            try:
                self.page.wait_for_function(f"(id) => {condition}", arg=plot, timeout=timeout_ms, polling=200)
            except PlaywrightError:
                raise NeverDrawn(
                    f"#{plot} {failure} within {timeout_ms / 1e3:.0f} s; status: {self.status()!r}; "
                    f"toasts: {self.toasts()}"
                ) from None

    def points(self, plot: str) -> int:
        return self.page.evaluate(JS_POINTS, plot)

    def tick_labels(self, plot: str, axis: str, subplot: str = "xy") -> dict[int, str]:
        """The labels a person reads on one axis ('x' or 'y') of a subplot ('xy', 'x2y2', ...), by the
        position each labels."""
        ticks = self.page.locator(f"#{plot} .subplot.{subplot} .{axis}axislayer-above .{axis}tick")
        pairs = ticks.evaluate_all("ticks => ticks.map(t => [t.__data__.x, t.textContent])")
        return {int(position): text for position, text in pairs}

    def shown_tick_labels(self, plot: str, axis: str, subplot: str = "xy") -> dict[int, str]:
        """The labels of `tick_labels` that the page shows (it hides those that would overlap)."""
        axis_id = re.search(f"{axis}\\d*", subplot).group()  # "x2" of "x2y2"
        ticks = self.page.locator(f"#{plot} .subplot.{subplot} .{axis}axislayer-above .{axis_id}tick")
        shown = "t => getComputedStyle(t.querySelector('text') || t).visibility !== 'hidden'"
        pairs = ticks.evaluate_all(f"ticks => ticks.filter({shown}).map(t => [t.__data__.x, t.textContent])")
        return {int(position): text for position, text in pairs}

    def overlapping_texts(self, plot: str) -> list[str]:
        """Each pair of the plot's shown texts whose boxes overlap (none, on a readable figure)."""
        return self.page.evaluate(JS_OVERLAPS, plot)

    def wait_for_tab(self, name: str) -> None:
        """Wait until the tab `name` is the one selected (a click selects it a render later)."""
        selected = "document.querySelector('#views [role=tab][aria-selected=true]')"
        self.page.wait_for_function(
            f"(name) => {selected}?.innerText.trim() === name", arg=name, timeout=DRAW_TIMEOUT_MS
        )

    def title(self, plot: str) -> str:
        return self.page.locator(f"#{plot} .gtitle").first.text_content()

    def strip_tokens(self) -> list[str]:
        """The token strip's tokens, without the positions written above them."""
        return self.page.locator("#token-strip span[title^='position']").evaluate_all(
            "spans => spans.map(s => s.lastChild.textContent)"
        )

    def status(self) -> str:
        return self.page.locator("#status").inner_text()

    def toasts(self) -> list[str]:
        """Every toast (error, warning or info) shown since the page was opened."""
        return self.page.evaluate("() => window.__toasts")

    def wait_for_toast(self, text: str) -> None:
        self.page.locator(".toast-body", has_text=text).first.wait_for()

    def injected_elements(self) -> list[str]:
        return self.page.evaluate(JS_INJECTED)

    def problems(self) -> list[str]:
        """Toasts, dialogs and script errors: a healthy page shows none."""
        return [f"toast: {t}" for t in self.toasts()] + [
            *(f"dialog: {d}" for d in self.dialogs),
            *(f"script error: {e}" for e in self.script_errors),
        ]

    # --- screenshots --------------------------------------------------------------------------

    def screenshot(self, element: Locator, mask: list[Locator]) -> Image.Image:
        """The element as a still image: the same twice in a row, STILL_MS apart, so nothing is
        mid-draw (on a busy machine a plot laid out again as its card settles comes a moment later)."""
        self.move_mouse_away()
        previous = None
        for _ in range(10):
            shot = element.screenshot(
                animations="disabled", caret="hide", mask=mask, mask_color="#808080", style=SCREENSHOT_CSS
            )
            if shot == previous:
                return Image.open(io.BytesIO(shot)).convert("RGB")
            previous = shot
            self.page.wait_for_timeout(STILL_MS)
        raise AssertionError(f"{element} kept changing: ten screenshots in a row all differ")


def updating_baselines() -> bool:
    return os.environ.get("UPDATE_SCREENSHOTS", "") not in ("", "0")


def on_canvas(pixels: np.ndarray, height: int, width: int) -> np.ndarray:
    """The image at the top left of a white canvas of the given size.  # [height, width, 3]"""
    canvas = np.full((height, width, 3), 255, np.uint8)
    canvas[: pixels.shape[0], : pixels.shape[1]] = pixels
    return canvas


def differing(actual: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """Where a channel moved by more than PIXEL_LEVELS; images of different sizes are compared on a
    canvas that holds both.  # [h, w] bool"""
    height, width = max(actual.shape[0], expected.shape[0]), max(actual.shape[1], expected.shape[1])
    actual, expected = on_canvas(actual, height, width), on_canvas(expected, height, width)
    return (np.abs(actual.astype(np.int16) - expected.astype(np.int16)) > PIXEL_LEVELS).any(-1)


def diff_image(expected: np.ndarray, differs: np.ndarray) -> Image.Image:
    """The baseline faded to grey, with the differing pixels in red."""
    grey = on_canvas(expected, *differs.shape).mean(-1, keepdims=True) * 0.3 + 178
    out = np.repeat(grey, 3, -1).astype(np.uint8)
    out[differs] = (255, 0, 0)
    return Image.fromarray(out)


def save_png(image: Image.Image, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path, optimize=True)


def match_baseline(image: Image.Image, name: str) -> None:
    """Compare with tests/screenshots/<name>.png (or write it, when updating the baselines)."""
    baseline = BASELINES / f"{name}.png"
    if updating_baselines():
        save_png(image, baseline)
        return
    actual_path, diff_path = OUTPUT / f"{name}-actual.png", OUTPUT / f"{name}-diff.png"
    if not baseline.exists():
        save_png(image, actual_path)
        raise AssertionError(f"no baseline {baseline}; see {actual_path}; UPDATE_SCREENSHOTS=1 writes it")
    expected = np.asarray(Image.open(baseline).convert("RGB"))
    actual = np.asarray(image)
    differs = differing(actual, expected)
    if actual.shape != expected.shape:
        problem = (
            f"the view is {actual.shape[1]}×{actual.shape[0]} px, its baseline "
            f"{expected.shape[1]}×{expected.shape[0]} px (the layout changed)"
        )
    elif differs.mean() > MAX_DIFFERING:
        problem = (
            f"{differs.mean():.2%} of pixels differ from the baseline by more than {PIXEL_LEVELS} "
            f"levels (at most {MAX_DIFFERING:.1%} may)"
        )
    else:
        return
    save_png(image, actual_path)
    save_png(diff_image(expected, differs), diff_path)
    raise AssertionError(f"{name}: {problem}; see {actual_path} and {diff_path}")

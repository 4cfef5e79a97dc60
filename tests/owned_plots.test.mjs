// The plot component's bookkeeping, with the DOM and Plotly faked: tick labels tidied as measured
// (explorer/app/ui/assets/ticks.mjs), a plot's calls one after another and what it names as shown
// (components/plot_view/frontend/owned_plot.js), and which layers are drawn ahead into which plots
// (components/plot_view/frontend/ahead.js). Run by `node --test tests/` (tests/test_codec.py runs it).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { SMALLEST_TICK_PX, tidyTicks } from "../explorer/app/ui/assets/ticks.mjs";

// --- a DOM as small as the modules read it ---

/** An element at a box; `width(px)` gives its width at a font size (a label), else its box's own. */
function element({ left = 0, top = 0, width = 10, height = 10, fontSize = "", widthAt = null } = {}) {
  return {
    style: { fontSize, visibility: "" },
    dataset: {},
    children: [],
    getBoundingClientRect() {
      const px = parseFloat(this.style.fontSize) || 12;
      const w = widthAt ? widthAt(px) : width;
      return { left, top, width: w, height, right: left + w, bottom: top + height };
    },
    querySelectorAll() {
      return [];
    },
  };
}

/** A drawn plot: its x axis's labels, its annotations, inside a frame of `frameWidth` × 200. */
function plotOf(labels, notes = [], frameWidth = 1000) {
  const axis = { querySelectorAll: (selector) => (selector === "text" ? labels : []) };
  const gd = element({ width: frameWidth, height: 200 });
  gd.querySelectorAll = (selector) =>
    selector.includes("xaxislayer-above") ? [axis] : selector === ".annotation" ? notes : [];
  return gd;
}

/** `count` tick labels `step` px apart, each as wide as `perPx` × its font size. */
const ticks = (count, step, perPx) =>
  Array.from({ length: count }, (_, i) => element({ left: i * step, fontSize: "12px", widthAt: (px) => perPx * px }));

const shown = (texts) => texts.filter((t) => t.style.visibility !== "hidden").length;
const sizes = (texts) => new Set(texts.map((t) => t.style.fontSize));

test("labels that fit keep their size and all show", () => {
  const labels = ticks(10, 40, 2); // 24 px wide at 12 px, 40 apart
  tidyTicks(plotOf(labels));
  assert.deepEqual(sizes(labels), new Set(["12px"]));
  assert.equal(shown(labels), 10);
});

test("crowded labels shrink until they fit, and come back to their size when there is room", () => {
  const labels = ticks(10, 22, 2); // 24 px at 12 px overlap 22 px apart; 20 px at 10 px fit
  tidyTicks(plotOf(labels));
  assert.deepEqual(sizes(labels), new Set(["10px"]));
  assert.equal(shown(labels), 10);
  const roomy = plotOf(labels.map((label, i) => Object.assign(label, { getBoundingClientRect: ticks(10, 40, 2)[i].getBoundingClientRect })));
  tidyTicks(roomy); // drawn again wider: the size Plotly set comes back
  assert.deepEqual(sizes(labels), new Set(["12px"]));
});

test("labels still crowded at the smallest size hide those that overlap, and those outside the frame", () => {
  const labels = ticks(10, 10, 2); // 18 px at the smallest size, 10 px apart: every other one overlaps
  tidyTicks(plotOf(labels, [], 75));
  assert.deepEqual(sizes(labels), new Set([`${SMALLEST_TICK_PX}px`]));
  const visible = labels.map((t) => t.style.visibility !== "hidden");
  assert.deepEqual(visible, [true, false, true, false, true, false, false, false, false, false]); // past 75 px: hidden
});

test("an annotation over one shown before it is hidden; an empty one is left alone", () => {
  const notes = [element({ left: 0, width: 50 }), element({ left: 30, width: 50 }), element({ left: 90, width: 20 })];
  const empty = element({ left: 0, width: 0 });
  tidyTicks(plotOf([], [...notes, empty]));
  assert.deepEqual(notes.map((n) => n.style.visibility), ["", "hidden", ""]);
  assert.equal(empty.style.visibility, "");
});

// --- a Plotly whose draws finish when the test says ---

globalThis.ResizeObserver = class {
  observe() {}
};
globalThis.requestIdleCallback = (callback) => setImmediate(callback);
globalThis.document = {
  createElement: () => plotDiv(),
  createComment: () => ({ replaceWith() {} }),
};

function plotDiv(width = 600) {
  const listeners = {};
  return {
    dataset: {},
    style: {},
    clientWidth: width,
    offsetParent: {},
    className: "",
    on: (name, listener) => (listeners[name] = listener),
    listeners,
    querySelectorAll: () => [],
    getBoundingClientRect: () => ({ left: 0, top: 0, right: width, bottom: 100, width, height: 100 }),
    appendChild() {},
    replaceWith() {},
  };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

/** A Plotly that records its calls; each react waits for `finish()` (all of them, in order). */
function fakePlotly() {
  const calls = [];
  const waiting = [];
  return {
    calls,
    react: (div, data, layout) =>
      new Promise((resolve) => {
        calls.push(["react", layout.title]);
        waiting.push(resolve);
      }),
    purge: () => calls.push(["purge"]),
    restyle: () => calls.push(["restyle"]),
    relayout: () => calls.push(["relayout"]),
    Plots: { resize: () => calls.push(["resize"]) },
    Icons: { camera: {} },
    downloadImage() {},
    finish: async () => {
      // every draw asked for so far (one starts once the call before it ends) ended, in turn
      await tick();
      while (waiting.length) {
        waiting.shift()();
        await tick();
      }
    },
  };
}

const { OwnedPlot } = await import("../components/plot_view/frontend/owned_plot.js");
const figure = (title) => ({ data: [], layout: { title }, config: { toImageButtonOptions: { filename: title } } });

test("a plot names what it shows only once drawn, and says while it has calls under way", async () => {
  const Plotly = fakePlotly();
  const plot = new OwnedPlot(plotDiv(), Plotly, () => {});
  const drawing = plot.draw(figure("a"), () => true, { head: 1 });
  await tick();
  assert.equal(plot.pending, 1);
  assert.equal(plot.shows, null);
  assert.ok(!plot.showing((it) => it.head === 1, 600), "a plot still drawing shows nothing yet");
  await Plotly.finish();
  assert.equal(await drawing, true);
  assert.equal(plot.pending, 0);
  assert.deepEqual(plot.shows, { head: 1 });
  assert.ok(plot.showing((it) => it.head === 1, 600));
  assert.ok(!plot.showing((it) => it.head === 1, 800), "drawn at another width");
  assert.ok(!plot.showing((it) => it.head === 2, 600));
  assert.equal(plot.div.dataset.download, "a");
  const relaying = plot.relayout({});
  assert.ok(!plot.showing((it) => it.head === 1, 600), "a plot with a call under way is not idle");
  await relaying;
  assert.ok(plot.showing((it) => it.head === 1, 600));
});

test("a clear that comes while a draw is under way runs after it, and leaves the plot clear", async () => {
  const Plotly = fakePlotly();
  const plot = new OwnedPlot(plotDiv(), Plotly, () => {});
  const drawing = plot.draw(figure("a"), () => true, { head: 1 });
  const clearing = plot.clear();
  assert.equal(plot.pending, 2);
  await Plotly.finish();
  await Promise.all([drawing, clearing]);
  assert.deepEqual(Plotly.calls, [["react", "a"], ["purge"]]);
  assert.equal(plot.shows, null);
  assert.equal(plot.pending, 0);
});

test("a draw no longer wanted when its turn comes draws nothing", async () => {
  const Plotly = fakePlotly();
  const plot = new OwnedPlot(plotDiv(), Plotly, () => {});
  let wanted = true;
  const first = plot.draw(figure("a"), () => true, { head: 1 });
  const second = plot.draw(figure("b"), () => wanted, { head: 2 });
  wanted = false; // the person moved on before the first draw ended
  await Plotly.finish();
  assert.equal(await first, true);
  assert.equal(await second, false);
  assert.deepEqual(Plotly.calls, [["react", "a"]]);
  assert.deepEqual(plot.shows, { head: 1 });
});

test("a failed draw leaves the plot's later calls running", async () => {
  const Plotly = fakePlotly();
  Plotly.react = () => Promise.reject(new Error("bad figure"));
  const plot = new OwnedPlot(plotDiv(), Plotly, () => {});
  await assert.rejects(plot.draw(figure("a")), /bad figure/);
  await plot.clear();
  assert.deepEqual(Plotly.calls, [["purge"]]);
  assert.equal(plot.pending, 0);
});

// --- layers drawn ahead ---

const { LayersAhead } = await import("../components/plot_view/frontend/ahead.js");
const { unpack } = await import("../components/plot_view/frontend/pack.mjs");
const fixture = (name) => JSON.parse(readFileSync(new URL(`./fixtures/codec/${name}`, import.meta.url), "utf8"));

/** Layer `layer`'s pack, from the fixture's figure (every layer alike but its number). */
function packOf(layer) {
  const { shown, differences } = fixture("heads.json");
  const layout = { ...shown.layout, meta: { ...(shown.layout.meta || {}), heads: differences, head: 0 } };
  const value = { plot: JSON.stringify({ ...shown, layout }), layer, head: 0, n_layers: 4, view: "v", thumbnails: `{"layer": ${layer}}` };
  return unpack(value);
}

/** A Plotly whose draws end at once, naming each by the layer its figure or thumbnails are of. */
function instantPlotly() {
  const drawn = [];
  return {
    drawn,
    react: async (div, data, layout) => drawn.push(layout.layer ?? layout.title?.text ?? "?"),
    purge() {},
    Plots: { resize() {} },
    Icons: { camera: {} },
    downloadImage() {},
  };
}

test("layers beside the one on screen are drawn ahead once each, and a pair showing one is kept", async () => {
  const Plotly = instantPlotly();
  const ahead = new LayersAhead(plotDiv(), Plotly, () => {}, () => {});
  const [before, after] = [packOf(1), packOf(3)];
  await ahead.draw([before, after], 0, 600, () => true);
  assert.equal(Plotly.drawn.length, 4, "two layers, a pipeline and thumbnails each");
  const pairs = [ahead.ready(before, 0, 600), ahead.ready(after, 0, 600)];
  assert.ok(pairs[0] && pairs[1] && pairs[0] !== pairs[1]);
  assert.equal(ahead.ready(before, 1, 600), null, "another head is not drawn ahead");
  assert.equal(ahead.ready(before, 0, 700), null, "nor another width");
  // the layers beside another layer on screen, one of them drawn ahead already: that pair is kept, the
  // other layer drawn into the pair that shows neither
  const next = packOf(2);
  await ahead.draw([before, next], 0, 600, () => true);
  assert.equal(Plotly.drawn.length, 6, "only the layer no pair showed was drawn");
  assert.equal(ahead.ready(before, 0, 600), pairs[0], "the pair showing layer 1 was kept");
  assert.equal(ahead.ready(after, 0, 600), null, "layer 3's pair was drawn over");
  assert.ok(ahead.ready(next, 0, 600));
});

test("drawing ahead stops once it is no longer wanted", async () => {
  const Plotly = instantPlotly();
  const ahead = new LayersAhead(plotDiv(), Plotly, () => {}, () => {});
  await ahead.draw([packOf(1), packOf(3)], 0, 600, () => false);
  assert.equal(Plotly.drawn.length, 0);
  assert.equal(ahead.ready(packOf(1), 0, 600), null);
});

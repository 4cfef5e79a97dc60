// The figure view's pure logic (components/plot_view/frontend/figure.mjs): a figure's width beyond its
// card, the room a heatmap's cell gives its text and each cell's label fitted to it, the picked
// cell's frame on every panel, a click's points as the page reads them. Run by `node --test tests/`
// (tests/test_codec.py runs it in the fast tier).
import assert from "node:assert/strict";
import { test } from "node:test";

import { fitted } from "../explorer/app/ui/assets/labels.mjs";
import {
  cellRoom,
  exportLayout,
  clickedPoints,
  fittedCells,
  framedShapes,
  minWidth,
} from "../components/plot_view/frontend/figure.mjs";

test("a figure wider than its card names its width; any other leaves the page's", () => {
  assert.equal(minWidth({ layout: { meta: { min_width: 1400 } } }), "1400px");
  assert.equal(minWidth({ layout: { meta: {} } }), "");
  assert.equal(minWidth({ layout: {} }), "");
});

test("a cell's room is the plot's width over the range's cells, less the gap and a margin", () => {
  assert.equal(cellRoom(600, [-0.5, 9.5], 1), 600 / 10 - 1 - 4);
  assert.equal(cellRoom(600, [9.5, -0.5]), 56); // a reversed axis is as wide
  assert.equal(cellRoom(600, [3, 3]), 0);
});

test("each cell shows as much of its label as its room holds", () => {
  const width = (text) => text.length * 6; // 6 px a character
  const fit = (label, room) => fitted(label, room, width);
  const cells = fittedCells([[" the", " question"], ["é", 12]], 30, fit);
  assert.deepEqual(cells, [[" the", " que…"], ["é", "12"]]);
  assert.equal(fitted("🙂🙂🙂🙂🙂🙂", 24, width).endsWith("…"), true); // whole characters, never halves
});

test("the picked cell is framed on every heatmap panel, in place of the last frame", () => {
  const data = [
    { type: "heatmap" },
    { type: "heatmap", xaxis: "x2", yaxis: "y2" },
    { type: "scatter", xaxis: "x3", yaxis: "y3" },
  ];
  const line = { type: "line", name: "context" };
  const once = framedShapes(data, [line], { x: 4, y: 2 });
  assert.equal(once.length, 3);
  assert.deepEqual(once[0], line);
  assert.deepEqual(
    once.slice(1).map((frame) => [frame.xref, frame.yref, frame.x0, frame.x1, frame.y0, frame.y1]),
    [
      ["x", "y", 3.5, 4.5, 1.5, 2.5],
      ["x2", "y2", 3.5, 4.5, 1.5, 2.5],
    ],
  );
  const moved = framedShapes(data, once, { x: 0, y: 0 });
  assert.equal(moved.length, 3);
  assert.equal(moved[1].x0, -0.5);
  assert.deepEqual(framedShapes(data, moved, null), [line]);
});

test("a click's points carry where, what and their trace's kind", () => {
  const event = {
    points: [{ x: 3, y: 1, customdata: [1, 2], data: { type: "heatmap", mode: undefined, z: [[0]] } }],
  };
  assert.deepEqual(clickedPoints(event), [
    { x: 3, y: 1, customdata: [1, 2], trace: { type: "heatmap", mode: undefined } },
  ]);
  assert.deepEqual(clickedPoints({}), []);
});

test("an export makes room for every axis' labels, the template's axes too, and changes no layout", () => {
  const layout = {
    xaxis: { title: { text: "key" } },
    yaxis2: { range: [3, -1] },
    title: { text: "t" },
    template: { layout: { xaxis: { tickformat: "d" }, font: { size: 12 } } },
  };
  const exported = exportLayout(layout);
  assert.deepEqual(exported.xaxis, { title: { text: "key" }, automargin: true });
  assert.deepEqual(exported.yaxis2, { range: [3, -1], automargin: true });
  assert.deepEqual(exported.template.layout.xaxis, { tickformat: "d", automargin: true });
  assert.deepEqual(exported.template.layout.font, { size: 12 });
  assert.equal(layout.xaxis.automargin, undefined); // the page's layout as it was
  assert.equal(layout.template.layout.xaxis.automargin, undefined);
});

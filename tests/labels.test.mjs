// Token labels as the page draws them (explorer/app/ui/assets/labels.mjs). Run by `node --test tests/`
// (tests/test_codec.py runs it in the fast tier).
import assert from "node:assert/strict";
import { test } from "node:test";

import { SHORT_END, TICK_FORMAT, fitted, shortTicks, uncutAxes } from "../explorer/app/ui/assets/labels.mjs";

const split = `é¹${SHORT_END} (byte 1 of 2 of “é”)`;

test("a token axis whose labels hold a hover part draws its ticks cut, its hover whole", () => {
  const layout = { xaxis: { labelalias: { 3: split, 4: " the" } }, yaxis: { labelalias: { 0: " a" } } };
  shortTicks(layout);
  assert.equal(layout.xaxis.tickformat, TICK_FORMAT);
  assert.equal(layout.xaxis.labelalias["00000003"], "é¹"); // the tick, as drawn
  assert.equal(layout.xaxis.labelalias["3"], split); // the hover, whole
  assert.equal(layout.xaxis.labelalias["00000004"], " the");
  assert.equal(layout.yaxis.tickformat, undefined); // nothing to cut: left as it is
  assert.deepEqual(uncutAxes(layout), []); // cut once
});

test("axes in the template's defaults are cut too, and a label's next line stays", () => {
  const layout = { template: { layout: { xaxis: { labelalias: { 12: `x¹${SHORT_END} (byte 1)<br>12` } } } } };
  assert.equal(uncutAxes(layout).length, 1);
  shortTicks(layout);
  assert.equal(layout.template.layout.xaxis.labelalias["00000012"], "x¹<br>12");
});

test("a cell shows as many whole characters as fit, then …", () => {
  const width = (text) => Array.from(text).length * 10; // 10 px a character
  assert.equal(fitted(" Paris", 60, width), " Paris");
  assert.equal(fitted(" capital", 50, width), " cap…");
  assert.equal(fitted("😀😀😀", 25, width), "😀…"); // never half a surrogate pair
  assert.equal(fitted(" x", 5, width), "…");
});

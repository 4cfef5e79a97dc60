// The layer view's pure logic (components/plot_view/frontend/pack.mjs) against the codec's fixtures
// (tests/codec_fixtures.py): a layer's value unpacked, each head drawn from the pack as the server
// would have sent it (maps rebuilt, ticks cut), a long prompt's other heads joined only to the layer
// they were asked for. Run by `node --test tests/` (tests/test_codec.py runs it in the fast tier).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import * as codec from "../explorer/app/ui/assets/codec.mjs";
import * as labels from "../explorer/app/ui/assets/labels.mjs";
import {
  besideHolding,
  figureOf,
  held,
  holds,
  join,
  keep,
  keepNeighbours,
  keptFor,
  missing,
  unpack,
} from "../components/plot_view/frontend/pack.mjs";

const fixture = (name) => JSON.parse(readFileSync(new URL(`./fixtures/codec/${name}`, import.meta.url), "utf8"));

/** The view's value for the fixture's layer: head 0's figure carrying the others (as the app sends). */
function layerValue({ shown, differences }, meta = { heads: differences, head: 0 }, layer = 2, view = "v") {
  const layout = { ...shown.layout, meta: { ...(shown.layout.meta || {}), ...meta } };
  return { plot: JSON.stringify({ ...shown, layout }), layer, head: 0, n_layers: 4, view, thumbnails: "{}" };
}

/** A figure as the page would draw it from the server's own: maps rebuilt, ticks cut. */
function drawnFrom(sent) {
  const figure = structuredClone(sent);
  codec.rebuild(figure.data);
  labels.shortTicks(figure.layout);
  return figure;
}

const mapValues = (z) => (z === undefined ? undefined : Array.from(codec.flat(z).values));

function assertSameFigure(actual, expected, where) {
  assert.deepEqual(actual.layout, expected.layout, `${where}: layout`);
  assert.deepEqual(actual.config, expected.config, `${where}: config`);
  assert.equal(actual.data.length, expected.data.length);
  actual.data.forEach((trace, i) => {
    const { z, customdata, ...rest } = trace;
    const { z: expectedZ, customdata: expectedCustom, ...expectedRest } = expected.data[i];
    assert.deepEqual(rest, expectedRest, `${where} trace ${i}`);
    assert.deepEqual(mapValues(z), mapValues(expectedZ), `${where} trace ${i} z`);
    assert.deepEqual(customdata, expectedCustom, `${where} trace ${i} customdata`);
  });
}

test("a layer's value unpacks to its layer, shown head and every head it holds", () => {
  const heads = fixture("heads.json");
  const pack = unpack(layerValue(heads));
  assert.equal(pack.layer, 2);
  assert.equal(pack.shown, 0);
  assert.equal(pack.ask, null);
  assert.equal(pack.nLayers, 4);
  assert.equal(pack.view, "v");
  assert.equal(pack.thumbnails, "{}");
  assert.deepEqual(held(pack), heads.heads.map((_, h) => h));
  assert.ok(holds(pack, heads.heads.length - 1) && !holds(pack, heads.heads.length));
  assert.equal(pack.layout.meta.heads, undefined, "Plotly never sees the other heads");
});

test("each head drawn from the pack is the figure the server sent for it, rebuilt", async () => {
  const heads = fixture("heads.json");
  const pack = unpack(layerValue(heads));
  for (let h = 0; h < heads.heads.length; h++) {
    const expected = drawnFrom(heads.heads[h]);
    const meta = { ...(expected.layout.meta || {}) }; // what the pack carried for the page goes
    assertSameFigure(await figureOf(pack, h), { ...expected, layout: { ...expected.layout, meta } }, `head ${h}`);
  }
  const again = await figureOf(pack, 1);
  assert.notEqual(again.data, (await figureOf(pack, 1)).data, "every call gives new objects");
});

test("a long prompt's layer holds its shown head until the other heads answer its ask", async () => {
  const heads = fixture("heads.json");
  const ask = "2,0,abc123";
  const pack = unpack({ ...layerValue(heads, { others: ask }), head: 0 });
  assert.equal(pack.ask, ask);
  assert.deepEqual(held(pack), [0]);
  assert.ok(!join(pack, { others: "2,0,stale", heads: heads.differences }), "another figure's answer");
  assert.ok(!join(pack, null), "no answer: the layer asked for is gone");
  assert.deepEqual(held(pack), [0]);
  assert.ok(join(pack, { others: ask, heads: heads.differences }));
  assert.deepEqual(held(pack), heads.heads.map((_, h) => h));
  await assert.rejects(figureOf(unpack(layerValue(heads, { others: ask })), 1), /head 1 is not in the layer's pack/);
});

test("the view keeps the layer on screen and those of its view a step away, and asks for the rest", () => {
  const heads = fixture("heads.json");
  const at = (layer, view = "v") => unpack(layerValue(heads, undefined, layer, view));
  const two = at(2);
  let kept = keep(new Map(), two);
  assert.deepEqual(missing(kept, two), [1, 3]);
  assert.deepEqual(missing(keep(new Map(), at(3)), at(3)), [2], "none past the model's last layer");
  assert.deepEqual(missing(keep(new Map(), at(0)), at(0)), [1]);

  assert.ok(!keepNeighbours(kept, two, { around: 1, neighbours: [layerValue(heads, undefined, 0)] }), "asked around 1");
  const answer = [1, 3, 0].map((layer) => layerValue(heads, undefined, layer));
  answer.push(layerValue(heads, undefined, 3, "another prompt"));
  assert.ok(keepNeighbours(kept, two, { around: 2, neighbours: answer }));
  assert.deepEqual([...kept.keys()].sort(), [1, 2, 3], "two steps away and another view's are left out");
  assert.equal(kept.get(3).view, "v");
  assert.deepEqual(missing(kept, two), []);

  const three = kept.get(3);
  assert.equal(keptFor(kept, two, 3, heads.heads.length - 1), three, "every head of it drawn with no request");
  assert.equal(keptFor(kept, two, 3, heads.heads.length), null, "a head it does not hold is the server's");
  assert.equal(keptFor(kept, at(2, "restyled"), 3, 0), null, "another view's is the server's");
  kept = keep(kept, three);
  assert.deepEqual([...kept.keys()].sort(), [2, 3], "a step on: the layer two away goes");
  assert.equal(kept.get(2), two, "the layer left is kept as it was");
  assert.deepEqual(missing(kept, three), [], "layer 4 is past the model's last");
  assert.deepEqual([...keep(kept, at(2, "restyled")).keys()], [2], "a new view keeps nothing of the old");
});

test("a long prompt's kept layer holds its own head alone until its other heads answer", () => {
  const heads = fixture("heads.json");
  const two = unpack(layerValue(heads));
  const kept = keep(new Map(), two);
  const long = layerValue(heads, { others: "3,0,abc123" }, 3);
  assert.ok(keepNeighbours(kept, two, { around: 2, neighbours: [long] }));
  assert.ok(keptFor(kept, two, 3, 0));
  assert.equal(keptFor(kept, two, 3, 1), null);
});

test("the layers drawn ahead are those kept a step away that hold the head, thumbnails and all", () => {
  const heads = fixture("heads.json");
  const two = unpack(layerValue(heads));
  const kept = keep(new Map(), two);
  assert.deepEqual(besideHolding(kept, two, 0), [], "none kept yet");
  const one = layerValue(heads, undefined, 1);
  const long = layerValue(heads, { others: "3,0,abc123" }, 3);
  const four = layerValue(heads, undefined, 4);
  assert.ok(keepNeighbours(kept, two, { around: 2, neighbours: [one, long, four] }));
  assert.deepEqual(besideHolding(kept, two, 0).map((pack) => pack.layer), [1, 3]);
  assert.deepEqual(besideHolding(kept, two, 1).map((pack) => pack.layer), [1], "layer 3 holds head 0 alone");
  kept.get(1).thumbnails = null;
  assert.deepEqual(besideHolding(kept, two, 1), [], "a layer without its thumbnails is drawn when stepped to");
});

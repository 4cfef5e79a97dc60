// The page's decoder (explorer/app/ui/assets/codec.mjs) against the fixtures the Python encoder wrote
// (tests/codec_fixtures.py): each map it rebuilds equals the figure's own, bit for bit (the weighted
// hover to float32 rounding), and each head's figure rebuilt from another's equals it as sent.
// Run by `node --test tests/` (tests/test_codec.py runs it in the fast tier).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import * as codec from "../explorer/app/ui/assets/codec.mjs";

const FOLDER = new URL("./fixtures/codec/", import.meta.url);
const fixture = (name) => JSON.parse(readFileSync(new URL(name, FOLDER), "utf8"));

function values(z) {
  const { values: array, rows, cols } = codec.flat(z);
  return { array: Array.from(array), rows, cols };
}

function assertSameValues(actual, expected, where, tolerance = 0) {
  const a = values(actual);
  const e = values(expected);
  assert.equal(a.array.length, e.array.length, `${where}: ${a.array.length} values, expected ${e.array.length}`);
  for (let i = 0; i < e.array.length; i++) {
    const [x, y] = [a.array[i], e.array[i]];
    if (Number.isNaN(y)) assert.ok(Number.isNaN(x), `${where}[${i}]: ${x}, expected NaN`);
    else if (tolerance === 0) assert.ok(Object.is(x, y), `${where}[${i}]: ${x}, expected ${y}`);
    else assert.ok(Math.abs(x - y) <= tolerance * Math.max(1, Math.abs(y)), `${where}[${i}]: ${x}, expected ${y}`);
  }
}

for (const name of ["exact", "eight_bit", "pooled", "weighted", "angles"]) {
  test(`${name}: every map left out or packed is rebuilt as the figure holds it`, () => {
    const { version, sent, expected } = fixture(`${name}.json`);
    assert.equal(version, codec.VERSION);
    assert.ok(Object.keys(expected).length > 0);
    const data = codec.rebuild(structuredClone(sent));
    for (const [index, maps] of Object.entries(expected)) {
      for (const [key, map] of Object.entries(maps)) {
        const tolerance = key === "customdata" ? 1e-6 : 0; // α from a float32 product over a norm
        assertSameValues(data[index][key], map, `${name} trace ${index} ${key}`, tolerance);
      }
    }
    for (const trace of data) assert.ok(!codec.unbuilt(trace), `${name}: a trace left unbuilt`);
  });
}

test("a trace that lacks a rebuilt map is told apart from one rebuilt", () => {
  const { sent } = fixture("exact.json");
  assert.deepEqual(sent.map(codec.unbuilt).slice(0, 5), [false, true, true, true, true]);
});

test("an unknown rule is refused, not drawn blank", () => {
  const data = [{ z: { dtype: "f4", bdata: "AACAPw==", shape: "1,1" } }, { meta: { derived: { op: "cube", source: 0 } } }];
  assert.throws(() => codec.rebuild(data), /unknown derived map: cube/);
});

test("heads: each head's figure rebuilt from the shown one's and its deflated difference is as sent", async () => {
  const { version, shown, differences, heads } = fixture("heads.json");
  assert.equal(version, codec.VERSION);
  assert.equal(differences[0], null);
  const deflated = JSON.stringify(differences).includes('"deflate":true');
  assert.ok(deflated, "the fixture's differences carry deflated arrays");
  for (let h = 1; h < heads.length; h++) {
    const figure = codec.applyDifference(shown, await codec.inflate(differences[h]));
    assert.deepEqual(figure.layout, heads[h].layout);
    assert.deepEqual(figure.config, heads[h].config);
    assert.equal(figure.data.length, heads[h].data.length);
    figure.data.forEach((trace, i) => {
      const { z, ...rest } = trace;
      const { z: expectedZ, ...expectedRest } = heads[h].data[i];
      assert.deepEqual(rest, expectedRest, `head ${h} trace ${i}`);
      if (expectedZ === undefined) assert.equal(z, undefined);
      else assertSameValues(z, expectedZ, `head ${h} trace ${i} z`);
    });
  }
});

// The paths through a node of a graph figure (components/plot_view/frontend/paths.mjs): what lights
// while a person hovers or pins a node of the circuit's graph per position. Run by `node --test tests/`
// (tests/test_codec.py runs it in the fast tier).
import assert from "node:assert/strict";
import { test } from "node:test";

import { litPaths, pathsThrough, pointedNode } from "../components/plot_view/frontend/paths.mjs";

// 0 emb → 1 head → 3 logits; 0 emb → 2 kv → 1 head (attention); 4 mlp → 3 logits; 0 → 4
const EDGES = [
  [0, 1],
  [1, 3],
  [0, 2],
  [2, 1],
  [4, 3],
  [0, 4],
];

test("the paths through a node are its ancestors' edges into it and its descendants' out of it", () => {
  const head = pathsThrough(EDGES, 1);
  assert.deepEqual(head.edges, [0, 1, 2, 3]);
  assert.deepEqual([...head.nodes].sort(), [0, 1, 2, 3]);
  const mlp = pathsThrough(EDGES, 4); // not through the head: emb → MLP → logits only
  assert.deepEqual(mlp.edges, [4, 5]);
  assert.deepEqual([...mlp.nodes].sort(), [0, 3, 4]);
  const kv = pathsThrough(EDGES, 2); // the embedding into it, and on through the head to the logits
  assert.deepEqual(kv.edges, [1, 2, 3]);
});

test("a node with no edge lights itself alone, and a cycle ends", () => {
  assert.deepEqual(pathsThrough(EDGES, 9), { nodes: new Set([9]), edges: [] });
  assert.deepEqual(pathsThrough([[0, 1], [1, 0]], 0).edges, [0, 1]);
});

test("lit: a line shape for each edge of the paths, every other trace and node dimmed; none: as drawn", () => {
  const paths = { nodes: 2, edges: EDGES, x: [0, 1, 2, 3, 4], y: [-1, 0, 0, 1, 0.5], colour: "red" };
  const traces = [{ opacity: 0.75 }, {}, {}];
  const lit = litPaths(paths, traces, 4);
  const ends = lit.shapes.map((shape) => [shape.x0, shape.y0, shape.x1, shape.y1]);
  assert.deepEqual(ends, [[4, 0.5, 3, 1], [0, -1, 4, 0.5]]);
  assert.ok(lit.shapes.every((shape) => shape.name === "lit" && shape.layer === "below" && shape.line.color === "red"));
  assert.deepEqual(lit.opacity.map((o) => Math.round(o * 1000) / 1000), [0.09, 0.12, 1]);
  assert.deepEqual(lit.nodeOpacity, [1, 0.2, 0.2, 1, 1]);
  const none = litPaths(paths, traces, null);
  assert.deepEqual(none, { shapes: [], opacity: [0.75, 1, 1], nodeOpacity: 1 });
});

test("a hover names a node only on the node trace of a figure with paths", () => {
  const paths = { nodes: 3, edges: EDGES };
  assert.equal(pointedNode(paths, [{ curveNumber: 3, pointNumber: 4 }]), 4);
  assert.equal(pointedNode(paths, [{ curveNumber: 1, pointNumber: 4 }]), null);
  assert.equal(pointedNode(undefined, [{ curveNumber: 3, pointNumber: 4 }]), null);
  assert.equal(pointedNode(paths, []), null);
});

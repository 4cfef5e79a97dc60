// @ts-check
// The paths through a node of a graph figure (the circuit's graph per position), lit while a person
// hovers or pins the node: pure functions over the figure's `layout.meta.paths`, tested by node
// (tests/graph_paths.test.mjs).
//
// `meta.paths`: {nodes: the node trace's index, edges: [[from, to], ...] each edge between two points
// of the node trace, writer first, x and y: the node trace's points, colour: the lit paths'}. The lit
// paths are drawn as the layout's line shapes, under the traces (a shape takes no hover or click). A
// path runs from the embedding to the logits; the paths through a node are every edge from one of its
// ancestors into it or another ancestor, and every edge from it or one of its descendants.

const DIM_TRACE = 0.12; // the opacity of the traces not lit
const DIM_NODE = 0.2; // and of the nodes off every lit path

/**
 * The nodes and edges on a path through `node`: its ancestors, itself and its descendants, and the
 * edges among them that run along such a path.
 * @param {number[][]} edges [[from, to]]
 * @param {number} node
 * @returns {{nodes: Set<number>, edges: number[]}} edges as indices into `edges`
 */
export function pathsThrough(edges, node) {
  const into = new Map(), out = new Map();
  edges.forEach(([from, to], i) => {
    if (!into.has(to)) into.set(to, []);
    if (!out.has(from)) out.set(from, []);
    into.get(to).push(i);
    out.get(from).push(i);
  });
  const lit = new Set();
  const walk = (links, end) => {
    const seen = new Set([node]);
    const stack = [node];
    while (stack.length) {
      for (const i of links.get(stack.pop()) || []) {
        lit.add(i);
        const next = edges[i][end];
        if (!seen.has(next)) {
          seen.add(next);
          stack.push(next);
        }
      }
    }
    return seen;
  };
  const up = walk(into, 0), down = walk(out, 1);
  return { nodes: new Set([...up, ...down]), edges: [...lit].sort((a, b) => a - b) };
}

/**
 * What to draw to light the paths through `node` (null: none lit, every trace as drawn).
 * @param {{nodes: number, edges: number[][], x: number[], y: number[], colour?: string}} paths the
 *   figure's `meta.paths`
 * @param {{opacity?: number}[]} traces the figure's data, as drawn
 * @param {number | null} node
 * @returns {{shapes: object[], opacity: number[], nodeOpacity: number | number[]}} `shapes`: a line
 *   for each lit edge (named "lit"); `opacity`: one a trace, the node trace's included
 */
export function litPaths(paths, traces, node) {
  const drawn = traces.map((trace) => (trace.opacity === undefined ? 1 : trace.opacity));
  if (node === null || node === undefined) return { shapes: [], opacity: drawn, nodeOpacity: 1 };
  const { nodes, edges } = pathsThrough(paths.edges, node);
  const line = { color: paths.colour || "#ea580c", width: 3 };
  const shapes = edges.map((i) => {
    const [from, to] = paths.edges[i];
    const [x0, y0, x1, y1] = [paths.x[from], paths.y[from], paths.x[to], paths.y[to]];
    return { type: "line", name: "lit", layer: "below", xref: "x", yref: "y", x0, y0, x1, y1, line };
  });
  const opacity = drawn.map((value, i) => (i === paths.nodes ? value : value * DIM_TRACE));
  const nodeOpacity = paths.x.map((_, i) => (nodes.has(i) ? 1 : DIM_NODE));
  return { shapes, opacity, nodeOpacity };
}

/**
 * The node a hover or click of Plotly's `points` names, or null (another trace, or no paths).
 * @param {{nodes: number} | undefined} paths
 * @param {{curveNumber: number, pointNumber: number}[]} points
 */
export function pointedNode(paths, points) {
  const point = points && points[0];
  return paths && point && point.curveNumber === paths.nodes ? point.pointNumber : null;
}

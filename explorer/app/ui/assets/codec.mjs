// @ts-check
// Attention Explorer's wire format, decoded: the one reader of what explorer/figures/codec.py writes.
//
// A figure goes to the page as Plotly's JSON with its big maps made small (codec.py):
// - typed arrays ({dtype, bdata, shape}, base64) for every map: float32 values, or 8-bit codes;
// - `meta.packed` ({op: "tril", fill}): a causal map sent as its lower triangle, row by row;
// - `meta.derived`: a map left out because it follows from another trace or from a rule:
//   "scale" float32(source × float32(by)), "same" the source's values, "causal" the source where the
//   key is at or before the query and `fill` (null: NaN) above, "angles" RoPE's float32(m × θ_i)
//   wrapped to (−π, π] in float32 steps, as numpy's `wrap_angle` does;
// - `meta.weighted` ({sums, norms}): a weighted softmax map's hover, [α, ‖α·v·W_O‖] a cell, left out;
// - a head's figure as what differs from another's (`difference`): traces whole by index, the
//   layout's and config's top-level keys (null: gone), its big arrays deflated (zlib, `deflate`).
// `rebuild` makes a sent figure's data whole again, bit for bit (float32 rounding for the weighted
// hover), before Plotly draws it. Pure functions of their arguments, tested by `node --test` against
// the fixtures under tests/fixtures/codec (written by the Python encoder).

import { VERSION } from "./shared.mjs";

export { VERSION };

/** @typedef {{dtype: string, bdata: string | ArrayBuffer, shape?: string, deflate?: boolean}} TypedArraySpec */

const ARRAYS = { f4: Float32Array, u1: Uint8Array };

// Maps rebuilt here (the others are as the server sent them). Plotly reads a spec over an ArrayBuffer
// without copying; rows of typed arrays would cost more (its colour clean-up walks every row's keys).
const built = new WeakSet();

/** A map's values as a typed-array spec over their buffer, marked as rebuilt here. */
export function spec(values, rows, cols) {
  const dtype = values instanceof Float32Array ? "f4" : "u1";
  const z = { dtype, bdata: values.buffer, shape: `${rows},${cols}` };
  built.add(z);
  return z;
}

/** Whether a map is as the server sent it (not rebuilt here yet). */
export function isSent(z) {
  return Boolean(z) && !built.has(z);
}

/** The bytes of base64 text. */
export function bytesOf(base64) {
  const text = atob(base64);
  const bytes = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
  return bytes;
}

/**
 * A map as sent (base64 bdata) or as rebuilt here (an ArrayBuffer): its values in one typed array,
 * and its rows and columns.
 * @param {TypedArraySpec} z
 */
export function flat(z) {
  const buffer = typeof z.bdata === "string" ? bytesOf(z.bdata).buffer : z.bdata;
  const values = new ARRAYS[z.dtype](buffer);
  const [rows, cols] = z.shape === undefined ? [1, values.length] : String(z.shape).split(",").map(Number);
  return { values, rows, cols };
}

/** A map sent as its lower triangle, row by row (n(n+1)/2 values): n × n, `fill` above. */
export function lowerTriangle(z, fill) {
  const { values } = flat(z);
  const n = Math.round((Math.sqrt(8 * values.length + 1) - 1) / 2);
  const out = new values.constructor(n * n);
  if (fill !== 0) out.fill(fill);
  for (let i = 0, at = 0; i < n; at += ++i) out.set(values.subarray(at, at + i + 1), i * n);
  return spec(out, n, n);
}

const PI32 = Math.fround(Math.PI);
const TWO_PI32 = Math.fround(2 * Math.PI);

/** RoPE's angle of pair i at position m, float32(m × θ_i), wrapped to (−π, π] in float32 steps as
 * numpy does it: a row for each of n positions. */
export function ropeAngles(invFreq, n) {
  const theta = invFreq.map(Math.fround);
  const out = new Float32Array(n * theta.length);
  for (let m = 0, at = 0; m < n; m++) {
    for (let i = 0; i < theta.length; i++, at++) {
      const shifted = Math.fround(Math.fround(m * theta[i]) + PI32);
      const wrapped = Math.fround((shifted % TWO_PI32) - PI32);
      out[at] = wrapped === -PI32 ? PI32 : wrapped;
    }
  }
  return spec(out, n, theta.length);
}

/** A weighted map's hover data, [α, ‖α·v·W_O‖] a cell: each share × its row's Σ ‖α·v·W_O‖ is the
 * cell's ‖α·v·W_O‖, and that over its key's ‖v·W_O‖ its α. Decodes the trace's map once, in place. */
export function keyWrites(trace) {
  const [sums, norms] = ["sums", "norms"].map((name) => flat(trace.meta.weighted[name]).values);
  const { values, rows, cols } = flat(trace.z);
  trace.z = spec(values, rows, cols);
  const out = new Float32Array(2 * values.length);
  for (let i = 0, at = 0; i < rows; i++) {
    for (let j = 0; j < cols; j++, at++) {
      const written = values[at] * sums[i];
      out[2 * at] = norms[j] > 0 ? written / norms[j] : 0;
      out[2 * at + 1] = written;
    }
  }
  return { dtype: "f4", bdata: out.buffer, shape: `${rows},${cols},2` };
}

/** Whether a trace still lacks what the page rebuilds (drawn before the page's script was in place). */
export function unbuilt(trace) {
  const meta = trace.meta;
  return Boolean(
    meta && ((meta.derived && !trace.z) || (meta.packed && isSent(trace.z)) || (meta.weighted && !trace.customdata)),
  );
}

/** A sent figure's traces made whole, in place: packed maps unpacked, weighted hover and derived maps
 * rebuilt (a derived map from its source as rebuilt). */
export function rebuild(data) {
  for (const trace of data || []) {
    const packed = trace.meta && trace.meta.packed;
    if (packed && isSent(trace.z)) trace.z = lowerTriangle(trace.z, packed.fill);
    if (trace.meta && trace.meta.weighted && !trace.customdata) trace.customdata = keyWrites(trace);
  }
  for (const trace of data || []) {
    const derived = trace.meta && trace.meta.derived;
    if (!derived || trace.z) continue;
    if (derived.op === "angles") {
      trace.z = ropeAngles(derived.inv_freq, derived.positions);
      continue;
    }
    const source = data[derived.source];
    const { values, rows, cols } = flat(source.z);
    source.z = spec(values, rows, cols); // decoded once, here
    if (derived.op === "scale") {
      const by = Math.fround(derived.by);
      trace.z = spec(values.map((v) => Math.fround(v * by)), rows, cols);
    } else if (derived.op === "same") {
      trace.z = spec(values, rows, cols);
    } else if (derived.op === "causal") {
      const fill = derived.fill === null || derived.fill === undefined ? NaN : derived.fill;
      const out = values.slice();
      for (let i = 0; i < rows; i++) out.fill(fill, i * cols + i + 1, (i + 1) * cols);
      trace.z = spec(out, rows, cols);
    } else {
      throw new Error(`unknown derived map: ${derived.op}`);
    }
  }
  return data;
}

/** Each `deflate` array of a value as its bytes (zlib, in the platform's own inflater). */
export async function inflate(value) {
  if (Array.isArray(value)) return Promise.all(value.map(inflate));
  if (!value || typeof value !== "object") return value;
  if (value.deflate) {
    const bytes = bytesOf(value.bdata);
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"));
    const { deflate, ...array } = value;
    return { ...array, bdata: await new Response(stream).arrayBuffer() };
  }
  const entries = await Promise.all(Object.entries(value).map(async ([key, v]) => [key, await inflate(v)]));
  return Object.fromEntries(entries);
}

/** A figure from another's (`base`: {data, layout, config}) and what differs (inflated): the traces
 * that differ, whole, by index; the layout's and config's top-level keys (null: gone). */
export function applyDifference(base, diff) {
  const merged = (part) => {
    const out = { ...base[part] };
    for (const [key, value] of Object.entries(diff[part] || {})) {
      if (value === null) delete out[key];
      else out[key] = value;
    }
    return out;
  };
  return {
    data: base.data.map((trace, i) => (diff.data && diff.data[i]) || trace),
    layout: merged("layout"),
    config: merged("config"),
  };
}

// What the layer view keeps of a layer: the shown head's pipeline as sent, and each other head's as
// what differs from it (explorer/app/head_switch.py), from which it draws any head with no request;
// and the layers it keeps beside the one on screen, drawn with no request when the picker steps to
// one. Pure functions over the wire format's values; tested by node (tests/layer_view.test.mjs).

import { applyDifference, inflate, rebuild } from "../../../explorer/app/ui/assets/codec.mjs";
import { shortTicks } from "../../../explorer/app/ui/assets/labels.mjs";

/**
 * @typedef {{data: object[], layout: object, config: object}} Figure
 * @typedef {Figure & {layer: number, shown: number, heads: (object | null)[], ask: string | null,
 *   nLayers: number, view: string, thumbnails: string | null, inflated: Map<number, Promise<object>>}} Pack
 */

/**
 * A layer's pack from the view's value ({plot: the figure's JSON text, layer, head, n_layers, view,
 * thumbnails?}).
 * The figure's meta may carry every other head (`heads`, the shown one's entry null) or, for a long
 * prompt, what the view asks the other heads by once it is drawn (`others`: "layer,head,fingerprint").
 * `view` names the run and map style the layer was drawn for; `thumbnails` is every head's map (a
 * figure's JSON text), absent where another head of the layer on screen came (they stay as they are).
 * @returns {Pack}
 */
export function unpack(value) {
  const figure = typeof value.plot === "string" ? JSON.parse(value.plot) : value.plot;
  const { heads, head, others, ...meta } = figure.layout.meta || {};
  return {
    data: figure.data,
    layout: { ...figure.layout, meta },
    config: figure.config || {},
    layer: Number(value.layer ?? 0),
    shown: Number(value.head ?? head ?? 0),
    heads: heads || [],
    ask: others || null,
    nLayers: Number(value.n_layers ?? 0),
    view: String(value.view ?? ""),
    thumbnails: value.thumbnails ?? null,
    inflated: new Map(),
  };
}

/** Whether the pack draws head `head` with no request. */
export function holds(pack, head) {
  return Boolean(pack) && (head === pack.shown || Boolean(pack.heads[head]));
}

/** The heads the pack draws with no request, in order. */
export function held(pack) {
  if (!pack) return [];
  const heads = pack.heads.map((difference, head) => (difference ? head : -1)).filter((head) => head >= 0);
  return [...new Set([pack.shown, ...heads])].sort((a, b) => a - b);
}

/**
 * The other heads' differences, answered for the pack's `ask` ({others, heads}, as
 * `payload.other_heads` sends them), joined to it; false where they answer another layer or figure.
 */
export function join(pack, answer) {
  if (!pack || !answer || answer.others !== pack.ask || pack.heads.length) return false;
  pack.heads = answer.heads;
  return true;
}

/**
 * Head `head`'s figure, ready for Plotly: the figure the server would have sent for it, its maps
 * rebuilt and its ticks cut to what they show. Every call gives new objects (Plotly keeps what it
 * is given, and rebuilding writes into the traces).
 * @returns {Promise<Figure>}
 */
export async function figureOf(pack, head) {
  let difference = { data: {}, layout: {}, config: {} };
  if (head !== pack.shown) {
    if (!pack.heads[head]) throw new Error(`head ${head} is not in the layer's pack`);
    if (!pack.inflated.has(head)) pack.inflated.set(head, inflate(pack.heads[head]));
    difference = await pack.inflated.get(head);
  }
  const figure = structuredClone(applyDifference(pack, difference));
  rebuild(figure.data);
  shortTicks(figure.layout);
  return figure;
}

/**
 * A figure sent whole (every head's thumbnails: the figure's JSON text), ready for Plotly.
 * @returns {Figure}
 */
export function figureFromText(text) {
  const figure = JSON.parse(text);
  figure.config = figure.config || {};
  rebuild(figure.data);
  shortTicks(figure.layout);
  return figure;
}

/**
 * The layers the view keeps once `pack` is on screen: it, and those of its view beside it (a step away).
 * @param {Map<number, Pack>} kept
 * @returns {Map<number, Pack>}
 */
export function keep(kept, pack) {
  const next = new Map([[pack.layer, pack]]);
  for (const [layer, other] of kept) {
    if (other.view === pack.view && Math.abs(layer - pack.layer) === 1) next.set(layer, other);
  }
  return next;
}

/**
 * The pack kept for `layer` that draws `head` with no request, in the view of `pack` (on screen);
 * null where the server must draw it.
 * @param {Map<number, Pack>} kept
 * @returns {Pack | null}
 */
export function keptFor(kept, pack, layer, head) {
  const found = kept.get(layer);
  return found && pack && found.view === pack.view && holds(found, head) ? found : null;
}

/**
 * The packs `kept` holds beside `pack` (a step away, in its view) that draw head `head` with no
 * request, thumbnails and all: the layers a step would show, to draw ahead.
 * @param {Map<number, Pack>} kept
 * @returns {Pack[]}
 */
export function besideHolding(kept, pack, head) {
  return beside(pack)
    .map((layer) => keptFor(kept, pack, layer, head))
    .filter((found) => found !== null && found.thumbnails !== null);
}

/** The layers a step from `pack`'s (some may lie past the model's first or last). */
const beside = (pack) => [pack.layer - 1, pack.layer + 1];

/** The layers of the model beside `pack` that `kept` lacks, to ask for. */
export function missing(kept, pack) {
  return beside(pack).filter((layer) => layer >= 0 && layer < pack.nLayers && !kept.has(layer));
}

/**
 * The neighbours answered for `pack` ({around, neighbours: the layers' values}), kept beside it:
 * those of its view a step away. False where they answer another layer.
 * @param {Map<number, Pack>} kept
 */
export function keepNeighbours(kept, pack, answer) {
  if (!pack || !answer || answer.around !== pack.layer) return false;
  for (const value of answer.neighbours || []) {
    const neighbour = unpack(value);
    if (neighbour.view === pack.view && Math.abs(neighbour.layer - pack.layer) === 1) {
      kept.set(neighbour.layer, neighbour);
    }
  }
  return true;
}

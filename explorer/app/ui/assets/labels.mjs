// @ts-check
// Token labels as the page draws them: ticks cut to what they show, and a cell's text cut to its width.
// Pure functions of their arguments (tested by `node --test`: tests/labels.test.mjs).

import { SHORT_END } from "./shared.mjs";

export { SHORT_END };

// Plotly sizes a plot's margins to its tick labels as it draws them: a tick cut after drawing would
// leave a split character's whole hover text ("—¹⁣ (byte 1 of 3 of “—”)") pushing the margin out as
// if it were shown, and squash the maps. So an axis holding such labels formats its ticks apart from
// its hover ("00000012", hover "12"), and those keys alias each label as the tick shows it, cut at
// SHORT_END: drawn as short as shown. (Hover formats positions with the axis' hoverformat, "d" on
// every token axis.)
export const TICK_FORMAT = "08d";
const CUT = new RegExp(`${SHORT_END}[^<]*`, "g"); // to the label's end, or its next line (the flow's "<br>12")

/** [holder, name] of each axis whose ticks would show a label's hover part: in the layout, or in its
 * template's defaults for every axis. */
export function uncutAxes(layout) {
  const holders = [layout, layout && layout.template && layout.template.layout].filter(Boolean);
  return holders.flatMap((holder) =>
    Object.entries(holder)
      .filter(([name, axis]) => /^[xy]axis\d*$/.test(name) && axis && axis.labelalias && axis.tickformat !== TICK_FORMAT)
      .filter(([, axis]) => Object.values(axis.labelalias).some((label) => String(label).includes(SHORT_END)))
      .map(([name]) => [holder, name]),
  );
}

/** The layout's token axes set to draw their ticks cut at SHORT_END (in place; idempotent). */
export function shortTicks(layout) {
  for (const [holder, name] of uncutAxes(layout)) {
    const axis = holder[name];
    const ticks = {};
    for (const [key, label] of Object.entries(axis.labelalias)) ticks[key.padStart(8, "0")] = String(label).replace(CUT, "");
    holder[name] = { ...axis, tickformat: TICK_FORMAT, labelalias: { ...axis.labelalias, ...ticks } };
  }
  return layout;
}

/** As much of `whole` as `width(text)` keeps within `room`, cut with "…" (whole characters, not UTF-16
 * halves); the most characters that fit, found by halving. */
export function fitted(whole, room, width) {
  if (width(whole) <= room) return whole;
  const chars = Array.from(whole);
  let low = 0;
  let high = chars.length - 1; // the most characters that fit before "…"
  while (low < high) {
    const mid = (low + high + 1) >> 1;
    if (width(chars.slice(0, mid).join("") + "…") <= room) low = mid;
    else high = mid - 1;
  }
  return chars.slice(0, low).join("") + "…";
}

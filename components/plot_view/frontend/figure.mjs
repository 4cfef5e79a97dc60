// @ts-check
// What the figure view (FigureView.svelte) works out about a figure it draws: pure functions over the
// figure's plain values and what the drawn plot measures, tested by node (tests/figure_view.test.mjs).

/**
 * The figure's width beyond its card's (`layout.meta.min_width`, px: the lens' grid, a column a
 * position), for the card's `--plot-min-width`; "" leaves the page's own minimum.
 * @param {{layout?: {meta?: {min_width?: number}}}} figure
 */
export function minWidth(figure) {
  const width = figure.layout && figure.layout.meta && figure.layout.meta.min_width;
  return width ? `${width}px` : "";
}

/**
 * The room a heatmap's cell gives its text (px): the plot area's `width` over the x range's cells, less
 * the gap between cells and a little margin each side.
 * @param {number} width @param {[number, number]} range @param {number} gap
 */
export function cellRoom(width, range, gap = 0) {
  const cells = Math.abs(range[1] - range[0]);
  return cells > 0 ? width / cells - gap - 4 : 0;
}

/**
 * Each cell's text as much of its whole label as `room` holds (`fitted` cuts one label).
 * @param {string[][]} whole [rows][columns]
 * @param {number} room
 * @param {(whole: string, room: number) => string} fit
 */
export function fittedCells(whole, room, fit) {
  return whole.map((row) => row.map((label) => fit(String(label), room)));
}

/**
 * The layout's shapes with a frame named `name` around cell (x, y) of every heatmap panel, in place of
 * the frames of that name it had; none where `cell` is null.
 * @param {{type?: string, xaxis?: string, yaxis?: string}[]} data
 * @param {object[] | undefined} shapes
 * @param {{x: number, y: number} | null} cell
 */
export function framedShapes(data, shapes, cell, name = "picked") {
  const others = (shapes || []).filter((shape) => shape.name !== name);
  if (!cell) return others;
  const frames = data
    .filter((trace) => trace.type === "heatmap")
    .map((trace) => ({
      type: "rect",
      name,
      xref: trace.xaxis || "x",
      yref: trace.yaxis || "y",
      x0: cell.x - 0.5,
      x1: cell.x + 0.5,
      y0: cell.y - 0.5,
      y1: cell.y + 0.5,
      line: { color: "#111827", width: 2.5 },
      fillcolor: "rgba(0,0,0,0)",
    }));
  return [...others, ...frames];
}

/**
 * A click's points as the page's script reads them: where, what they carry, and their trace's kind.
 * @param {{points?: any[]}} event Plotly's plotly_click event
 */
export function clickedPoints(event) {
  return (event.points || []).map((point) => ({
    x: point.x,
    y: point.y,
    customdata: point.customdata,
    trace: { type: point.data && point.data.type, mode: point.data && point.data.mode },
  }));
}

/**
 * A layout as its export draws it: on the page a plot's tick labels past its edge, or over another,
 * are hidden after it is drawn (ticks.mjs); an export, drawn apart, makes room for them instead (every
 * axis' `automargin`: its margins grow to its labels, and its title stands beyond them). Every axis,
 * the template's too; the layout itself is left as it is.
 * @param {Record<string, any>} layout
 */
export function exportLayout(layout) {
  const hidden = (holder) =>
    Object.fromEntries(
      Object.entries(holder).map(([name, value]) =>
        /^[xy]axis\d*$/.test(name) && value && typeof value === "object"
          ? [name, { ...value, automargin: true }]
          : [name, value],
      ),
    );
  const template = layout.template && layout.template.layout;
  const own = hidden(layout);
  return template ? { ...own, template: { ...layout.template, layout: hidden(template) } } : own;
}

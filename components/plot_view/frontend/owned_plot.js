// One Plotly plot the component owns: drawn in place (`Plotly.react`, never remounted), its calls one
// after another (a clear that came while a draw was under way would otherwise be drawn over), laid
// out again when its card's width changes (a plot drawn on a hidden tab, at Plotly's default width, as
// its tab opens), its ticks tidied after each draw, its downloads named by what it shows. Public API
// only: Plotly's react, restyle, relayout, purge, Plots.resize, downloadImage, Icons and events.
import { tidyTicks } from "../../../explorer/app/ui/assets/ticks.mjs";
import { exportLayout } from "./figure.mjs";

export class OwnedPlot {
  /**
   * @param {HTMLElement} div the plot's own element (inside `block`, which is its card)
   * @param {any} Plotly the view's Plotly
   * @param {(gd: HTMLElement, event: any) => void} onClick a click on a point
   * @param {(gd: HTMLElement) => void} afterPlot after each time Plotly has drawn it (its ticks tidied)
   * @param {(gd: HTMLElement, event: any, over: boolean) => void} onHover the pointer over a point, or
   *   leaving it
   */
  constructor(div, Plotly, onClick, afterPlot = () => {}, onHover = () => {}) {
    this.div = div;
    this.Plotly = Plotly;
    this.onClick = onClick;
    this.afterPlot = afterPlot;
    this.onHover = onHover;
    this.queue = Promise.resolve();
    this.pending = 0; // its calls not done yet
    this.shows = null; // what its last draw showed, as the caller named it
    this.hooked = false;
    this.drawnWidth = 0;
    this.options = {}; // the drawn figure's download settings (name, size)
    this.config = null; // one object whatever is drawn: a config that changes redraws the whole plot
    this.watch = new ResizeObserver(() => this.resized());
    this.watch.observe(div);
  }

  /**
   * The figure drawn; `stillWanted()` asked again just before. `shows` names what it shows once drawn
   * (the view's: which layer and head), null until then; `mark`: its start marked for the benchmark
   * (a person's action; not a layer drawn ahead).
   */
  draw(figure, stillWanted = () => true, shows = null, mark = true) {
    return this.serial(async () => {
      if (!stillWanted()) return false;
      this.shows = null; // until it is drawn
      this.options = figure.config.toImageButtonOptions || {};
      this.div.dataset.download = this.options.filename || ""; // what its downloads are named
      if (!this.config) this.config = this.configOf(figure.config);
      if (mark) performance.mark("plot-draw"); // when drawing began, for the benchmark
      // As wide as its card (the figure names its height); laid out again when the card's width changes.
      await this.Plotly.react(this.div, figure.data, { autosize: true, ...figure.layout }, this.config);
      this.drawnWidth = this.div.clientWidth;
      if (!this.hooked) this.hook();
      this.shows = shows;
      return true;
    });
  }

  /** Whether it shows `shows` (what a draw named), at `width`, with nothing of its own to do. */
  showing(test, width) {
    return this.pending === 0 && this.shows !== null && test(this.shows) && this.drawnWidth === width;
  }

  clear(stillWanted = () => true) {
    return this.serial(() => {
      if (!stillWanted()) return;
      this.Plotly.purge(this.div);
      this.hooked = false;
      this.shows = null;
    });
  }

  /** Plotly's restyle and relayout, in turn with its draws (on a plot drawn, else nothing). */
  restyle(update, traces) {
    return this.serial(() => this.hooked && this.Plotly.restyle(this.div, update, traces));
  }

  relayout(update) {
    return this.serial(() => this.hooked && this.Plotly.relayout(this.div, update));
  }

  serial(task) {
    this.pending++;
    const next = this.queue.then(task, task).finally(() => this.pending--);
    this.queue = next.catch(() => undefined);
    return next;
  }

  resized() {
    if (this.div.offsetParent === null) return;
    if (this.hooked && this.div.clientWidth !== this.drawnWidth) {
      this.drawnWidth = this.div.clientWidth;
      this.serial(() => this.Plotly.Plots.resize(this.div));
    }
  }

  hook() {
    // Plotly's `on` exists once it has drawn: the first draw is tidied here, later ones on their event.
    this.hooked = true;
    this.div.on("plotly_afterplot", () => this.drawn());
    this.div.on("plotly_click", (event) => this.onClick(this.div, event));
    this.div.on("plotly_hover", (event) => this.onHover(this.div, event, true));
    this.div.on("plotly_unhover", (event) => this.onHover(this.div, event, false));
    this.drawn();
  }

  drawn() {
    tidyTicks(this.div);
    this.afterPlot(this.div);
  }

  // Plotly's own download, replaced by two that name the file for what is on screen (SVG, and PNG at
  // twice the size), at publication size, with room for their tick labels (`exportLayout`).
  configOf(figureConfig) {
    const { toImageButtonOptions, ...rest } = figureConfig;
    const download = (format) => (gd) =>
      this.Plotly.downloadImage({ data: gd.data, layout: exportLayout(gd.layout) }, {
        format,
        filename: this.options.filename || "attention-explorer",
        width: this.options.width || 1600,
        height: this.options.height || 500,
        scale: format === "png" ? 2 : 1,
      });
    const Icons = this.Plotly.Icons;
    return {
      ...rest,
      modeBarButtonsToRemove: ["toImage"],
      modeBarButtonsToAdd: [
        { name: "svg", title: "Download as SVG (publication size)", icon: Icons.camera, click: download("svg") },
        { name: "png", title: "Download as PNG (publication size)", icon: Icons["camera-retro"], click: download("png") },
      ],
    };
  }
}

/**
 * On a touch screen a finger drawn across a plot in `element` scrolls the page (its card scrolls
 * sideways): Plotly's drag areas, which would take the touch for a zoom box or a turn of a polar plot,
 * never see it (stopped in the capture phase). A tap still hovers and clicks through the mouse events
 * it makes; zoom and pan stay in the toolbar. Returns what undoes it.
 * @param {HTMLElement} element
 */
export function letTouchScroll(element) {
  if (!window.matchMedia("(pointer: coarse)").matches) return () => {};
  const scroll = (event) => {
    if (event.target.closest?.(".drag")) event.stopPropagation();
  };
  element.addEventListener("touchstart", scroll, { capture: true });
  return () => element.removeEventListener("touchstart", scroll, { capture: true });
}

/**
 * The page script's asks ("ask-server" {event, data} on `element`) sent to the server as the
 * component's typed events, those named in `relayed` alone. Returns what undoes it.
 * @param {HTMLElement} element @param {Set<string>} relayed
 * @param {(name: string, data: any) => void} dispatch
 */
export function relayAsks(element, relayed, dispatch) {
  const asked = (event) => {
    const { event: name, data } = event.detail;
    if (relayed.has(name)) dispatch(name, data);
  };
  element.addEventListener("ask-server", asked);
  return () => element.removeEventListener("ask-server", asked);
}

// Layers drawn ahead: the layers the view keeps beside the one on screen (pack.mjs `besideHolding`),
// drawn while the page is idle into plots of their own, off screen, so that a step to one shows it
// at once: its plots take the place of those on screen (moved, not drawn again), and those go off
// screen in turn, still drawn, for a step back. Each layer ahead is a pair of OwnedPlots (pipeline,
// thumbnails) in `holder`, an element laid out at the cards' width and never painted; each plot
// names what it shows (OwnedPlot `shows`: the pack and head its pipeline was drawn for, the
// thumbnails' figure text), so a pair is shown only for the very layer and head asked for, at the
// cards' width. Public API only, as OwnedPlot.
import { OwnedPlot } from "./owned_plot.js";
import { figureFromText, figureOf } from "./pack.mjs";

const LAYERS_AHEAD = 2; // the layers a step away: one before, one after

/** Resolves once the page is idle (each plot drawn ahead is a task of its own, between a person's). */
const idle = () => new Promise((resolve) => requestIdleCallback(() => resolve(), { timeout: 1000 }));

/** Each element takes the other's place in the page. */
function exchange(a, b) {
  const mark = document.createComment("");
  a.replaceWith(mark);
  b.replaceWith(a);
  mark.replaceWith(b);
}

export class LayersAhead {
  /**
   * @param {HTMLElement} holder where the plots off screen are laid out
   * @param {any} Plotly the view's Plotly
   * @param {(gd: HTMLElement, event: any) => void} pipelineClicked
   * @param {(gd: HTMLElement, event: any) => void} thumbnailClicked
   */
  constructor(holder, Plotly, pipelineClicked, thumbnailClicked) {
    this.holder = holder;
    this.pairs = Array.from({ length: LAYERS_AHEAD }, () => {
      const plot = (onClick) => {
        const div = document.createElement("div");
        div.className = "layer-view";
        holder.appendChild(div);
        return new OwnedPlot(div, Plotly, onClick);
      };
      return { pipeline: plot(pipelineClicked), thumbnails: plot(thumbnailClicked) };
    });
  }

  /** The pair that shows `pack`'s head `head` at `width`, drawn and idle; null if none does. */
  ready(pack, head, width) {
    return this.pairs.find((pair) => shows(pair, pack, head, width)) || null;
  }

  /**
   * Each of `packs` (head `head`, at `width`) drawn off screen where no pair shows it yet, a plot per
   * idle moment, while `stillWanted()`. A pair showing one of `packs` is kept; the others are drawn over.
   * @returns {Promise<void>}
   */
  async draw(packs, head, width, stillWanted) {
    this.holder.style.width = `${width}px`;
    for (const pack of packs) {
      if (this.ready(pack, head, width)) continue;
      const pair = this.pairs.find((p) => !packs.some((other) => shows(p, other, head, width)));
      if (!pair) return;
      const still = () => stillWanted() && this.holder.style.width === `${width}px`;
      await idle();
      if (!still()) return;
      await pair.pipeline.draw(await figureOf(pack, head), still, { pack, head }, false);
      await idle();
      if (!still()) return;
      await pair.thumbnails.draw(figureFromText(pack.thumbnails), still, { thumbnails: pack.thumbnails }, false);
    }
  }

  /**
   * `pair` shown in place of `shown` ({pipeline, thumbnails}: the plots on screen), which take its
   * place off screen. Returns the plots now on screen.
   */
  swap(pair, shown) {
    exchange(pair.pipeline.div, shown.pipeline.div);
    exchange(pair.thumbnails.div, shown.thumbnails.div);
    const onScreen = { pipeline: pair.pipeline, thumbnails: pair.thumbnails };
    pair.pipeline = shown.pipeline;
    pair.thumbnails = shown.thumbnails;
    return onScreen;
  }

  clear() {
    for (const pair of this.pairs) for (const plot of [pair.pipeline, pair.thumbnails]) plot.clear();
  }
}

/** Whether `pair` shows `pack`'s head `head`, thumbnails and all, at `width`. */
function shows(pair, pack, head, width) {
  return (
    pair.pipeline.showing((it) => it.pack === pack && it.head === head, width) &&
    pair.thumbnails.showing((it) => it.thumbnails === pack.thumbnails, width)
  );
}

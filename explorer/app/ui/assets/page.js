// Attention Explorer: what the page does in the browser, loaded once by explorer/app/ui/page.py after
// the modules of its pure logic (`codec`: the wire format's decoder; `labels`: token labels cut to fit).
//
// - Tick labels: a token holding part of a character is labelled "é¹⁣ (byte 1 of 2 of “é”)"; the
//   hover shows it all, ticks are drawn cut at the invisible separator U+2063 (so the margins fit what
//   they show: `labels.shortTicks`). Then an axis whose labels would overlap sets them a little smaller, and
//   hides only those that would overlap the last one shown still, or pass the figure's edge, measured
//   as drawn, so no two ever collide (token axes leave the edge to this: Plotly's own check measured
//   them twice).
// - A heatmap whose cells name tokens (the lens) shows in each as much of its token as the cell holds.
// - A PNG button beside the modebar's SVG download, at publication size.
// - Clicking a cell of the head's maps (its own thumbnail, the zoom; the pipeline's own clicks are the
//   layer view's) asks why it scores as it does (#score-cell; a link's `cell=query,key` once the layer
//   view has drawn; "Open in Attention": the last query's most attended key); a head source there, or
//   a cell of the Overview's composition, opens that head.
// - Clicking a cell of the Overview, a listed top head or a head's thumbnail picks that layer and head;
//   the Overview frames the picked cell and "Open in Attention" opens it there. A head of the layer on
//   screen is the layer view's to draw (it holds every head's pipeline, or for a long prompt asks for
//   them once drawn), with no request, and so is a layer beside it that it keeps; the views that
//   follow the head and layer elsewhere ask the server only when on screen. Clicking a
//   cell of the patching heatmap opens that head on the clean prompt (written into #patched-head), a head of
//   the circuit's node map or graph on the first pair's clean prompt (#circuit-head). Clicking a token
//   of the token strip shows which heads look at it (its position written into #picked-token). Clicking
//   an attention edge of the Flow graph opens its layer and top head. A head picked in a chart of
//   another view opens the Attention tab on it, with a button back to the chart.
// - On a touch screen, a finger drawn across a figure scrolls it inside its card.
// - In the prompt, Enter runs it and Shift+Enter starts a new line.
// - Drawing (the gr.Plot figures; the layer view draws its own): a plot on a tab not on screen is
//   drawn when its tab is opened, not while it is hidden; a figure's maps left out or packed by the
//   wire format are rebuilt before it is drawn, by the decoder (`codec`). Gradio's plot component
//   is remounted for every new figure, and would draw it twice (into the plot on its way out,
//   then the new one): it is drawn once, starting from the margins the figure before it settled on
//   where its layout is that one's (`drawSettled`), so Plotly does not draw it twice more to settle them.

if (!window.__attentionExplorerPage) {
  window.__attentionExplorerPage = true;

  const hooked = new WeakSet();

  // A heatmap whose cells name tokens (the lens' grid) carries each cell's whole label in
  // `meta.fit_text` ([rows][columns]; its own `text`, short, is what an export draws): each cell shows
  // as much of its label as the cell's width holds, cut with "…" (hover gives it whole). Widths come
  // from a canvas in the labels' own font, so the page is not laid out once per label.
  const measure = document.createElement("canvas").getContext("2d");

  function fitCellText(gd) {
    for (const group of gd.querySelectorAll(".heatmaplayer g.hm")) {
      const trace = group.__data__ && group.__data__[0] && group.__data__[0].trace;
      const whole = trace && trace.meta && trace.meta.fit_text;
      if (!whole) continue;
      const xa = gd._fullLayout[`xaxis${(trace.xaxis || "x").slice(1)}`];
      const ya = gd._fullLayout[`yaxis${(trace.yaxis || "y").slice(1)}`];
      const room = Math.abs(xa.d2p(1) - xa.d2p(0)) - (trace.xgap || 0) - 4; // a little margin each side
      const first = Number(trace.x ? trace.x[0] : 0);
      for (const label of group.querySelectorAll("g.heatmap-label")) {
        const text = label.querySelector("text");
        const at = label.__data__;
        const row = whole[Math.round(ya.p2d(at.y))];
        const cell = row && row[Math.round(xa.p2d(at.x)) - first];
        if (!text || cell === undefined) continue;
        measure.font = `${text.style.fontSize} ${text.style.fontFamily}`;
        text.textContent = labels.fitted(String(cell), room, (t) => measure.measureText(t).width);
      }
    }
  }

  function addPngButton(gd) {
    const bar = gd.querySelector(".modebar");
    if (!bar || bar.querySelector(".png-button") || !window.Plotly) return;
    const group = document.createElement("div");
    group.className = "modebar-group";
    const button = document.createElement("a");
    button.className = "modebar-btn png-button";
    button.setAttribute("rel", "tooltip");
    button.setAttribute("data-title", "Download as PNG (publication size)");
    button.textContent = "PNG";
    button.style.cssText = "font: 600 10px sans-serif; padding: 3px 4px; cursor: pointer;";
    button.addEventListener("click", () => {
      const options = gd._context?.toImageButtonOptions || {};
      window.Plotly.downloadImage(gd, {
        format: "png",
        filename: options.filename || "attention-explorer",
        width: options.width || 1600,
        height: options.height || gd._fullLayout.height,
        scale: 2,
      });
    });
    group.appendChild(button);
    bar.appendChild(group);
  }

  function write(box, value) {
    // A hidden textbox's value, as typed: its Gradio event fires.
    const input = document.querySelector(`${box} textarea, ${box} input`);
    if (!input) return false;
    input.value = value;
    input.dispatchEvent(new Event("input", { bubbles: true }));
    return true;
  }

  function pickHead(layer, head, box = "#picked-head") {
    if (box === "#picked-head" && layer === currentLayer() && layerView()) {
      showHead(head); // the layer view draws it (and the head picker follows: "head-shown")
    } else if (!write(box, `${layer},${head},${Date.now()}`)) return;
    if (box === "#picked-head") {
      picked = { layer, head };
      markPicked();
    }
  }

  function pickCell(layer, head, query, key) {
    // A cell of a head's maps: why it scores as it does (written into #score-cell, drawn under the
    // pipeline: explorer/app/ui/why.py).
    if ([layer, head, query, key].every((n) => Number.isInteger(n) && n >= 0)) {
      write("#score-cell", `${layer},${head},${query},${key},${Date.now()}`);
    }
  }

  // A link's cell ("cell=query,key"), opened once its pipeline is drawn.
  let linkCell = /^(\d+),(\d+)$/.exec(new URLSearchParams(window.location.search).get("cell") || "");

  function openLinkCell() {
    if (!linkCell) return;
    const [, query, key] = linkCell.map(Number);
    linkCell = null;
    pickCell(currentLayer(), currentHead(), query, key);
  }

  function pickToken(position) {
    // A token of the strip: which heads look at it (written into #picked-token, drawn under the strip).
    if (Number.isInteger(position)) write("#picked-token", `${position},${Date.now()}`);
  }

  function currentLayer() {
    return Number(document.querySelector("#layer-slider input[type=number]")?.value || 0);
  }

  function currentHead() {
    const label = document.querySelector("#head-picker input")?.value || ""; // "head 6 · kv 1"
    const match = /head (\d+)/.exec(label);
    return match ? Number(match[1]) : 0;
  }

  // The Overview marks the picked layer and head: a frame around its cell on every panel, its name
  // above them beside "Open in Attention". `picked` holds a pick the page made and the server has not
  // answered yet (the controls still show the one before it).
  let picked = null;

  function markPicked() {
    if (picked && picked.layer === currentLayer() && picked.head === currentHead()) picked = null; // answered
    const layer = picked ? picked.layer : currentLayer();
    const head = picked ? picked.head : currentHead();
    const text = document.querySelector("#overview-picked-text");
    if (text) text.textContent = `Picked: layer ${layer} · head ${head}`;
    const gd = document.querySelector("#overview-plot .js-plotly-plot");
    if (!gd || !gd._fullLayout || !window.Plotly) return;
    const panels = (gd.data || []).filter((trace) => trace.type === "heatmap");
    const frames = panels.map((trace) => ({
      type: "rect",
      name: "picked",
      xref: trace.xaxis || "x",
      yref: trace.yaxis || "y",
      x0: head - 0.5,
      x1: head + 0.5,
      y0: layer - 0.5,
      y1: layer + 0.5,
      line: { color: "#111827", width: 2.5 },
      fillcolor: "rgba(0,0,0,0)",
    }));
    const others = (gd.layout.shapes || []).filter((shape) => shape.name !== "picked");
    const now = (gd.layout.shapes || []).filter((shape) => shape.name === "picked");
    const same = now.length === frames.length && now.every((shape) => shape.x0 === head - 0.5 && shape.y0 === layer - 0.5);
    if (!same) window.Plotly.relayout(gd, { shapes: [...others, ...frames] });
  }

  function markSoon() {
    setTimeout(markPicked, 150);
  }

  function openInAttention() {
    // The head opens on why it looks where it looks most from the last position.
    const opened = picked || { layer: currentLayer(), head: currentHead() };
    write("#score-cell", `${opened.layer},${opened.head},last,top,${Date.now()}`);
    document.querySelector("#views #tab-attention-button")?.click();
    setTimeout(() => document.querySelector("#pipeline-plot")?.scrollIntoView({ block: "start", behavior: "auto" }), 0);
  }

  // A head clicked in a chart of another view (patching, direct effects, the flow graph, the heads
  // looking at a token) opens the Attention tab on it, and a button takes the person back to the chart
  // (it goes when they open a tab themselves).
  let cameFrom = null; // { tab: the tab button the chart was on (none under the strip), chart }
  const BACK_ID = "back-to-chart";

  function backButton() {
    let button = document.getElementById(BACK_ID);
    if (!button) {
      button = document.createElement("button");
      button.id = BACK_ID;
      button.type = "button";
      button.hidden = true;
      button.addEventListener("click", goBack);
      document.body.appendChild(button);
    }
    return button;
  }

  function openFrom(gd) {
    const tab = document.querySelector("#views [role=tab][aria-selected=true]");
    const attention = tab && tab.id === "tab-attention-button";
    const chart = gd.closest(".block") || gd;
    cameFrom = { tab: attention ? null : tab, chart };
    const where = cameFrom.tab ? cameFrom.tab.textContent.trim() : "the heads looking at the token";
    const button = backButton();
    button.textContent = `← Back to ${where}`;
    button.hidden = false;
    openInAttention();
  }

  function goBack() {
    const from = cameFrom;
    leaveBack();
    if (!from) return;
    if (from.tab) from.tab.click();
    setTimeout(() => from.chart.scrollIntoView({ block: "center", behavior: "auto" }), 0);
  }

  function leaveBack() {
    cameFrom = null;
    const button = document.getElementById(BACK_ID);
    if (button) button.hidden = true;
  }

  document.addEventListener("click", (event) => {
    const target = event.target.closest ? event.target : null;
    if (event.isTrusted && target && target.closest("[role=tab]")) leaveBack(); // a tab opened by hand
    const row = target && target.closest(".top-head");
    const ranked = target && target.closest(".ranked-head");
    const token = target && target.closest("#token-strip .token");
    if (row) pickHead(Number(row.dataset.layer), Number(row.dataset.head));
    else if (ranked) {
      pickHead(Number(ranked.dataset.layer), Number(ranked.dataset.head), "#patched-head"); // a sweep's ranked head
      openFrom(ranked);
    }
    else if (token) pickToken(Number(token.querySelector(".position")?.textContent));
    else if (target && target.closest("#open-in-attention")) openInAttention();
    else if (target && target.closest("#layer-slider, #head-picker, [role=tab]")) markSoon();
  });
  for (const kind of ["input", "change", "keyup"]) {
    document.addEventListener(kind, (event) => {
      if (event.target.closest && event.target.closest("#layer-slider, #head-picker")) {
        picked = null;
        markSoon();
      }
    });
  }

  function onClick(gd, data) {
    const point = data.points && data.points[0];
    if (!point) return;
    if (gd.closest("#overview-plot")) {
      pickHead(Math.round(point.y), Math.round(point.x));
    } else if (gd.closest("#zoom-plot") && point.data.type === "heatmap") {
      pickCell(currentLayer(), currentHead(), Math.round(point.y), Math.round(point.x));
    } else if (gd.closest("#why-split-plot, #why-row-plot") && point.customdata && point.customdata[0] >= 0) {
      pickHead(Number(point.customdata[0]), Number(point.customdata[1])); // a head source
    } else if (gd.closest("#composition-plot") && point.data.type === "heatmap") {
      const heads = (gd.layout.meta && gd.layout.meta.composition_heads) || 1; // columns: later heads, layer by layer
      const later = Math.round(point.x);
      pickHead(Math.floor(later / heads), later % heads);
    } else if (gd.closest("#patching-plot")) {
      pickHead(Math.round(point.y), Math.round(point.x), "#patched-head");
      openFrom(gd);
    } else if (gd.closest("#circuit-nodes-plot") && point.data.type === "heatmap") {
      const cell = point.customdata; // per position: (layer, head, position) of the column
      if (cell) pickHead(Number(cell[0]), Number(cell[1]), "#circuit-head");
      else pickHead(Math.round(point.y), Math.round(point.x), "#circuit-head"); // a head of the circuit's node map
      openFrom(gd);
    } else if (gd.closest("#circuit-graph-plot") && point.customdata && point.data.mode === "markers") {
      pickHead(Number(point.customdata[0]), Number(point.customdata[1]), "#circuit-head"); // a head of the graph
      openFrom(gd);
    } else if (gd.closest("#patching-direct-plot") && point.data.type === "heatmap") {
      pickHead(Math.round(point.y), Math.round(point.x), "#patched-head"); // the heads, not the MLPs' bars
      openFrom(gd);
    } else if (gd.closest("#lens-attribution-plot, #heads-looking-at-plot") && point.data.type === "heatmap") {
      pickHead(Math.round(point.y), Math.round(point.x));
      openFrom(gd);
    } else if (gd.closest("#flow-plot") && point.customdata && point.customdata[1] >= 0) {
      pickHead(point.customdata[0], point.customdata[1]); // an attention edge: its layer and top head
      openFrom(gd);
    }
  }

  // On a touch screen a figure wider than its card scrolls inside it (page.css): a finger drawn across
  // a figure must scroll it, not draw a zoom box or turn a polar plot. Plotly's drag areas take every
  // touch for themselves (their touchstart stops the scroll, whatever the drag mode), so on a touch
  // screen they are left to the mouse events a tap makes: a tap still hovers and clicks (picks a head),
  // and zoom and pan stay in the figure's toolbar.
  const touch = window.matchMedia("(pointer: coarse)").matches;

  function letTouchScroll(gd) {
    if (!touch) return;
    for (const area of gd.querySelectorAll(".drag")) {
      if (!area._ontouchstart) continue;
      area.removeEventListener("touchstart", area._ontouchstart);
      area._ontouchstart = null;
    }
  }

  // The plots Gradio's plot components draw. The layer view (explorer/app/ui/layer_view.py) draws,
  // rebuilds and tidies its own with its own Plotly: nothing here touches it.
  const isLayerView = (gd) => Boolean(gd.closest(".layer-view-block"));
  const gradioPlots = () => [...document.querySelectorAll(".js-plotly-plot")].filter((gd) => !isLayerView(gd));

  function hook(gd) {
    if (hooked.has(gd) || typeof gd.on !== "function" || isLayerView(gd)) return;
    hooked.add(gd);
    gd.on("plotly_afterplot", () => {
      fitCellText(gd);
      ticks.tidyTicks(gd);
      addPngButton(gd);
      letTouchScroll(gd);
      if (gd.closest("#overview-plot")) markPicked();
    });
    gd.on("plotly_click", (data) => onClick(gd, data));
  }

  // The layer view (explorer/app/ui/layer_view.py) holds the layer's heads and draws the one asked
  // for ("show-head"); it says what it drew ("layer-drawn", "head-shown") and which head it does not
  // hold ("head-wanted": the server draws it, and what follows it, in one event).
  const layerView = () => document.querySelector("#pipeline-plot.layer-view-block");

  function showHead(head) {
    layerView()?.dispatchEvent(new CustomEvent("show-head", { detail: { head } }));
  }

  // A head the view drew (picked in the head picker, or a thumbnail clicked): the picker shows it.
  document.addEventListener("head-shown", ({ detail: { layer, head } }) => {
    if (currentHead() !== head) write("#page-head", `${head},${Date.now()}`);
    follow(layer, head);
  });
  document.addEventListener("head-wanted", ({ detail: { layer, head } }) => {
    if (currentHead() !== head) write("#picked-head", `${layer},${head},${Date.now()}`); // the server sets the picker too
    else if (write("#head-follow", followed({ layer, head, layerChanged: unfollowed?.layerChanged }, false))) {
      unfollowed = null; // picked in the picker: the server draws it and what follows it
    }
  });
  let drawnLayer = null; // the layer the view drew last
  document.addEventListener("layer-drawn", ({ detail: { layer, head, kept } }) => {
    if (kept) follow(layer, head, true); // drawn from the layers the view keeps: what follows is the page's to ask
    else if (layer !== drawnLayer) unfollowed = null; // the server's switch drew what follows it
    drawnLayer = layer;
    // A head picked while the layer's update was on its way is drawn from it; a link's cell opens.
    if (currentHead() !== head) showHead(currentHead());
    openLinkCell();
  });

  // The views that follow the head on other tabs (RoPE's q and k, the zoom, the generation's rows), and
  // after a layer the view drew from those it keeps, the layer's (GQA's head similarity, the
  // faithfulness check): on screen, asked for at once (#head-follow, one event); off screen, when their
  // tab is opened.
  const FOLLOWERS = "#rope-rotation-plot, #zoom-plot, #generation-plot";
  const LAYER_FOLLOWERS = "#similarity-plot, #faithfulness-plot";
  let unfollowed = null; // {layer, head, layerChanged}: what the followers off screen have not been drawn for

  function follow(layer, head, layerChanged = false) {
    unfollowed = { layer, head, layerChanged: layerChanged || Boolean(unfollowed?.layerChanged) };
    askFollowers();
  }

  function followed({ layer, head, layerChanged }, drawn) {
    // What #head-follow asks by: "layer,head,nonce", then "drawn" where the view drew the head, "layer"
    // where the layer's own views are wanted too.
    return [layer, head, Date.now(), ...(drawn ? ["drawn"] : []), ...(layerChanged ? ["layer"] : [])].join(",");
  }

  function askFollowers() {
    // One event for every follower, once one is on screen.
    if (!unfollowed) return;
    const watched = unfollowed.layerChanged ? `${FOLLOWERS}, ${LAYER_FOLLOWERS}` : FOLLOWERS;
    const onScreen = [...document.querySelectorAll(watched)].some((view) => view.offsetParent !== null);
    if (onScreen && write("#head-follow", followed(unfollowed, true))) unfollowed = null;
  }

  // Plotly settles a new plot's margins by drawing it twice: at the layout's own margins, then at
  // those its axes' tick labels and colour bars push out (a tenth of a second for the pipeline at 256
  // tokens). Gradio makes a new plot for every figure, so a figure whose layout differs from the one
  // before it only in its title and meta (another layer of the prompt) starts from the margins that
  // one settled on, and is drawn once. (A figure drawn into the same plot keeps its margins.) Should
  // its labels or bars push otherwise (or the figure's size differ), it is drawn again from its own
  // margins, as Plotly would have drawn it. Either way the layout keeps its own margins after, for
  // exports and resizes.
  const settled = new Map(); // a plot's block id -> { key, size: the margins it settled on, pushes }

  function marginKey(layout) {
    const { title, meta, ...rest } = layout || {};
    return JSON.stringify(rest);
  }

  function pushes(gd) {
    // What pushed the margins out, and how far (Plotly's own record; colour bars' ids are new in every
    // figure), at the figure's size.
    const full = gd._fullLayout;
    if (!full || !full._pushmargin) return null;
    const entries = Object.entries(full._pushmargin).filter(([id]) => id !== "base");
    const pushed = entries.map(([, margins]) => JSON.stringify(margins)).sort();
    return JSON.stringify([full.width, full.height, ...pushed]);
  }

  async function drawSettled(gd, [, layout], react) {
    const block = gd.closest(".block[id]")?.id;
    const key = marginKey(layout);
    const last = block && !gd._fullLayout && settled.get(block); // a new plot (Gradio remounts it)
    if (last && last.key === key && last.pushes !== null) {
      const own = layout.margin;
      await react({ ...layout, margin: { ...own, ...last.size } });
      if (pushes(gd) === last.pushes) {
        if (own === undefined) delete gd.layout.margin;
        else gd.layout.margin = own;
        return gd;
      }
    }
    await react(layout);
    const { l, r, t, b } = gd._fullLayout._size;
    if (block) settled.set(block, { key, size: { l, r, t, b }, pushes: pushes(gd) });
    return gd;
  }

  const pending = new Map(); // a hidden plot's latest arguments, drawn once it is shown
  const shown = (gd) => gd.offsetParent !== null;

  function wrap(plotly) {
    // Plotly arrives with Gradio's plot component; wrap its drawing once, before it draws.
    if (!plotly || plotly.__explorer) return;
    plotly.__explorer = true;
    const react = plotly.react;
    const resize = plotly.Plots.resize;
    const draw = (gd, args) => {
      if (!gd.isConnected) return Promise.resolve(gd); // its component was replaced: not on the page
      codec.rebuild(args[0]);
      labels.shortTicks(args[1]);
      // A figure that needs more width than its card (the lens' grid: a column a position) says so in
      // layout.meta.min_width; the card then scrolls sideways, as for the CSS minimums in page.css.
      const minWidth = args[1] && args[1].meta && args[1].meta.min_width;
      const card = gd.closest(".wide-plot");
      if (card) card.style.setProperty("--plot-min-width", minWidth ? `${minWidth}px` : "");
      if (!shown(gd) && gd._fullLayout) {
        pending.set(gd, args); // drawn before: its tab is hidden now
        return Promise.resolve(gd);
      }
      pending.delete(gd);
      return drawSettled(gd, args, (layout) => react.call(plotly, gd, args[0], layout, args[2]));
    };
    // Gradio's plot component is remounted for every new figure (a {#key} block): the figure is drawn
    // into the component on its way out, then into the new one, twice the work. A draw waits for the
    // task that asked for it to end, by when the old plot has left the page and is skipped; several
    // asks for one plot in that time draw the last once.
    const asked = new Map(); // plot -> { args, settle: [[resolve, reject]] }
    // (The layer view's Plotly, a bundle that also sets window.Plotly, arrives here too: its plot is
    // drawn as it asks.)
    plotly.react = function (target, data, layout, config) {
      const gd = typeof target === "string" ? document.getElementById(target) : target;
      if (!gd || isLayerView(gd)) return react.call(this, target, data, layout, config);
      let ask = asked.get(gd);
      if (!ask) {
        ask = { settle: [] };
        asked.set(gd, ask);
        setTimeout(() => {
          asked.delete(gd);
          Promise.resolve()
            .then(() => draw(gd, ask.args))
            .then(
              (value) => ask.settle.forEach(([resolve]) => resolve(value)),
              (error) => ask.settle.forEach(([, reject]) => reject(error)),
            );
        }, 0);
      }
      ask.args = [data, layout, config];
      return new Promise((resolve, reject) => ask.settle.push([resolve, reject]));
    };
    // Gradio resizes every plot just after it asks for it to be drawn, and Plotly then laid it out again
    // (some 25–35 ms for the pipeline at 256 tokens, 10–20 for the grid): a plot drawn at its card's
    // width needs none.
    const fits = (gd) => gd._fullLayout && Math.abs(gd._fullLayout.width - gd.clientWidth) <= 1;
    plotly.Plots.resize = (gd) => {
      if (isLayerView(gd)) return resize(gd);
      if (!shown(gd)) return Promise.resolve(gd);
      const ask = asked.get(gd);
      const drawn = ask ? new Promise((done) => ask.settle.push([done, done])) : Promise.resolve();
      return drawn.then(() => (!shown(gd) || fits(gd) ? gd : resize(gd))); // (maybe gone from the page since)
    };
    // A tab opened: its plots left pending are drawn, and any laid out at another width than it has now
    // (a new plot drawn while its tab was hidden, at Plotly's default 700 px; or one the window was
    // resized under while hidden) is laid out again at its card's width.
    const flush = () => {
      for (const [gd, args] of pending) {
        if (!shown(gd) || !gd.isConnected) continue;
        pending.delete(gd);
        plotly.react(gd, ...args).then(() => resize(gd));
      }
      for (const gd of gradioPlots()) {
        if (shown(gd) && !pending.has(gd) && gd._fullLayout && !fits(gd)) resize(gd);
      }
    };
    document.addEventListener("click", (event) => {
      if (!event.target.closest || !event.target.closest("[role=tab], .tab-container button")) return;
      setTimeout(() => {
        flush();
        askFollowers();
      }, 0);
    });
    // Anything drawn before the wrap: draw it again, its derived and packed maps rebuilt and its ticks cut.
    gradioPlots().forEach((gd) => {
      if ((gd.data || []).some(codec.unbuilt) || labels.uncutAxes(gd.layout).length) plotly.react(gd, gd.data, gd.layout);
    });
  }

  if (window.Plotly) wrap(window.Plotly);
  else {
    let plotly;
    Object.defineProperty(window, "Plotly", {
      configurable: true,
      get: () => plotly,
      set: (value) => {
        plotly = value;
        wrap(value);
      },
    });
  }

  // A plot becomes one when Plotly gives its div the class: look at what changed, not the whole page.
  const plotsIn = (node) =>
    node.nodeType !== 1 ? [] : node.classList.contains("js-plotly-plot") ? [node] : node.querySelectorAll(".js-plotly-plot");
  new MutationObserver((records) => {
    for (const record of records) {
      if (record.type === "attributes") record.target.classList.contains("js-plotly-plot") && hook(record.target);
      else for (const node of record.addedNodes) for (const gd of plotsIn(node)) hook(gd);
    }
  }).observe(document.body, {
    childList: true,
    subtree: true,
    attributes: true,
    attributeFilter: ["class"],
  });
  gradioPlots().forEach((gd) => {
    hook(gd); // drawn before this script: tidied now, later on each draw
    fitCellText(gd);
    ticks.tidyTicks(gd);
    addPngButton(gd);
    letTouchScroll(gd);
  });

  document.addEventListener(
    "keydown",
    (event) => {
      const box = event.target;
      if (event.key !== "Enter" || event.isComposing || !box.closest || !box.closest("#prompt")) return;
      event.preventDefault();
      event.stopImmediatePropagation();
      if (event.shiftKey) {
        const at = box.selectionStart;
        box.setRangeText("\n", at, box.selectionEnd, "end");
        box.dispatchEvent(new Event("input", { bubbles: true }));
      } else {
        document.querySelector("#run-button")?.click();
      }
    },
    true,
  );
}

// Attention Explorer: what the page does in the browser, loaded once by explorer/app/ui/page.py after
// the modules of its pure logic (`codec`: the wire format's decoder; `labels`: token labels cut to fit).
// It touches no plot: every figure is drawn by the page's plot component (components/plot_view), which
// tells what was clicked ("plot-click") and frames a cell when asked ("frame-cell").
//
// - Clicking a cell of the head's maps (its own thumbnail, the zoom; the pipeline's own clicks are the
//   layer view's) asks why it scores as it does (`cell_asked`; a link's `cell=query,key` once the layer
//   view has drawn; "Open in Attention": the last query's most attended key); a head source there, or
//   a cell of the Overview's composition, opens that head.
// - Clicking a cell of the Overview, a listed top head or a head's thumbnail picks that layer and head;
//   the Overview frames the picked cell and "Open in Attention" opens it there. A head of the layer on
//   screen is the layer view's to draw (it holds every head's pipeline, or for a long prompt asks for
//   them once drawn), with no request, and so is a layer beside it that it keeps; the views that
//   follow the head and layer elsewhere ask the server only when on screen (each ask one of the
//   layer view's typed events: `head_picked`, `follow`). Clicking a cell of the patching heatmap
//   opens that head on the clean prompt, a head of the circuit's node map or graph on the first
//   pair's clean prompt (each chart's `head_picked`; a row of the graph's ranked heads too), and an
//   attention edge of the circuit's graph per position opens why its head scores that key from that
//   query there. Clicking an attention edge of
//   the Flow graph opens its layer and top head. A head picked in a chart of another view opens the
//   Attention tab on it, with a button back to the chart.
// - In the prompt, Enter runs it and Shift+Enter starts a new line.

if (!window.__attentionExplorerPage) {
  window.__attentionExplorerPage = true;

  function pickHead(layer, head, chart = null) {
    // A head picked in the page: the layer view's to draw (a head of its layer, with no request) or to
    // ask the server for; a head picked in Intervene's or Circuit's charts, that chart's to ask for (it
    // opens the head on its prompt).
    if (chart) {
      ask(chart, "head_picked", { layer, head });
      return;
    }
    layerView()?.dispatchEvent(new CustomEvent("pick-head", { detail: { layer, head } }));
    picked = { layer, head };
    markPicked();
  }

  function pickCell(layer, head, query, key) {
    // A cell of a head's maps: why it scores as it does (the layer view's `cell_asked`, drawn under
    // the pipeline: explorer/app/ui/why.py).
    if ([layer, head, query, key].every((n) => Number.isInteger(n) && n >= 0)) {
      ask(layerView(), "cell_asked", { layer, head, query, key });
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
    document.querySelector("#overview-plot")?.dispatchEvent(new CustomEvent("frame-cell", { detail: { x: head, y: layer } }));
  }

  function markSoon() {
    setTimeout(markPicked, 150);
  }

  function openInAttention(askTop = true) {
    // The head opens on why it looks where it looks most from the last position (unless a cell of its
    // is pending: `pendingCell`).
    const opened = picked || { layer: currentLayer(), head: currentHead() };
    if (askTop) ask(layerView(), "cell_asked", { ...opened, query: null, key: null }); // the last query, its top key
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

  function openFrom(gd, askTop = true) {
    const tab = document.querySelector("#views [role=tab][aria-selected=true]");
    const attention = tab && tab.id === "tab-attention-button";
    const chart = gd.closest(".block") || gd;
    cameFrom = { tab: attention ? null : tab, chart };
    const where = cameFrom.tab ? cameFrom.tab.textContent.trim() : "the heads looking at the token";
    const button = backButton();
    button.textContent = `← Back to ${where}`;
    button.hidden = false;
    openInAttention(askTop);
  }

  // An attention edge of the circuit's graph per position: that head's score of the key from the
  // query, split once the layer view has drawn its layer on the graph's prompt (the first pair's clean
  // prompt, which the server runs as it opens the head). The ask waits a moment after the drawing (the
  // run's other outputs, which the split reads, land beside it) and is made again every few seconds
  // until Why shows the cell, for a minute at most.
  const PENDING_MS = 60_000;
  const PENDING_RETRY_MS = 4_000;
  let pendingCell = null; // {layer, head, query, key, until}

  function pendingShown() {
    const { layer, head, query, key } = pendingCell;
    const shown = ["layer", "head", "query", "key"].map((name) => Number(document.querySelector(`#score-${name} input`)?.value));
    return [layer, head, query, key].every((n, i) => shown[i] === n) && !document.querySelector("#why-score")?.hidden;
  }

  function openPendingCell(layer) {
    if (!pendingCell || pendingCell.layer !== layer || pendingCell.asking) return;
    pendingCell.asking = true;
    const askAgain = () => {
      if (!pendingCell) return;
      if (Date.now() > pendingCell.until || pendingShown()) {
        pendingCell = null;
        return;
      }
      const { head, query, key } = pendingCell;
      pickCell(layer, head, query, key);
      setTimeout(askAgain, PENDING_RETRY_MS);
    };
    setTimeout(askAgain, 100);
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
    const graphHead = target && target.closest(".graph-head");
    if (row) pickHead(Number(row.dataset.layer), Number(row.dataset.head));
    else if (ranked) {
      pickHead(Number(ranked.dataset.layer), Number(ranked.dataset.head), "#patching-plot"); // a sweep's ranked head
      openFrom(ranked);
    }
    else if (graphHead) {
      pickHead(Number(graphHead.dataset.layer), Number(graphHead.dataset.head), "#circuit-position-graph-plot"); // the graph's ranked head
      openFrom(graphHead);
    }
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

  document.addEventListener("plot-click", (event) => onClick(event.target, event.detail));

  function onClick(gd, { points, meta }) {
    // A click on a figure (its card `gd`): the point's x, y, customdata and trace's type and mode.
    const point = points && points[0];
    if (!point) return;
    if (gd.closest("#overview-plot")) {
      pickHead(Math.round(point.y), Math.round(point.x));
    } else if (gd.closest("#zoom-plot") && point.trace.type === "heatmap") {
      pickCell(currentLayer(), currentHead(), Math.round(point.y), Math.round(point.x));
    } else if (gd.closest("#why-split-plot, #why-row-plot") && point.customdata && point.customdata[0] >= 0) {
      pickHead(Number(point.customdata[0]), Number(point.customdata[1])); // a head source
    } else if (gd.closest("#composition-plot") && point.trace.type === "heatmap") {
      const heads = meta.composition_heads || 1; // columns: later heads, layer by layer
      const later = Math.round(point.x);
      pickHead(Math.floor(later / heads), later % heads);
    } else if (gd.closest("#patching-plot")) {
      pickHead(Math.round(point.y), Math.round(point.x), "#patching-plot");
      openFrom(gd);
    } else if (gd.closest("#circuit-nodes-plot") && point.trace.type === "heatmap") {
      const cell = point.customdata; // per position: (layer, head, position) of the column
      if (cell) pickHead(Number(cell[0]), Number(cell[1]), "#circuit-nodes-plot");
      else pickHead(Math.round(point.y), Math.round(point.x), "#circuit-nodes-plot"); // a head of the circuit's node map
      openFrom(gd);
    } else if (gd.closest("#circuit-graph-plot") && point.customdata && point.trace.mode === "markers") {
      pickHead(Number(point.customdata[0]), Number(point.customdata[1]), "#circuit-graph-plot"); // a head of the graph
      openFrom(gd);
    } else if (gd.closest("#circuit-position-graph-plot") && point.customdata) {
      // nodes are the one trace of markers with text; an attention edge's midpoint carries its cell
      const [layer, head, query, key] = [...point.customdata].map(Number);
      if (point.trace.mode === "markers" && point.customdata.length === 4) { // an attention edge: why the head looks there
        pendingCell = { layer, head, query, key, until: Date.now() + PENDING_MS };
        pickHead(layer, head, "#circuit-position-graph-plot");
        openFrom(gd, false);
      } else if (point.trace.mode === "markers+text" && layer >= 0) { // a head
        pickHead(layer, head, "#circuit-position-graph-plot");
        openFrom(gd);
      }
    } else if (gd.closest("#patching-direct-plot") && point.trace.type === "heatmap") {
      pickHead(Math.round(point.y), Math.round(point.x), "#patching-direct-plot"); // the heads, not the MLPs' bars
      openFrom(gd);
    } else if (gd.closest("#lens-attribution-plot, #heads-looking-at-plot") && point.trace.type === "heatmap") {
      pickHead(Math.round(point.y), Math.round(point.x));
      openFrom(gd);
    } else if (gd.closest("#flow-plot") && point.customdata && point.customdata[1] >= 0) {
      pickHead(point.customdata[0], point.customdata[1]); // an attention edge: its layer and top head
      openFrom(gd);
    }
  }

  // The layer view (explorer/app/ui/layer_view.py) holds the layer's heads and draws the one asked
  // for ("show-head", "pick-head"); it says what it drew ("layer-drawn", "head-shown") and which head
  // it does not hold ("head-wanted": the server draws it, and what follows it, in one event). What
  // the page asks the server for goes through it as its typed events ("ask-server").
  const layerView = () => document.querySelector("#pipeline-plot.layer-view-block");

  function showHead(head) {
    layerView()?.dispatchEvent(new CustomEvent("show-head", { detail: { head } }));
  }

  // A head picked in the head picker is the view's to draw from the press on its option (or Enter on
  // the option the keys reached), before Gradio's event path hears of it: its `select` then finds the
  // head drawn (the picker's options are the heads in order, so an option's index is its head).
  const pickedOption = (target) => target.closest?.("#head-picker li.item[data-index]");
  document.addEventListener("mousedown", (event) => {
    const option = event.button === 0 && pickedOption(event.target);
    if (option) showHead(Number(option.dataset.index));
  }, true);
  document.addEventListener("keydown", (event) => {
    if (event.key !== "Enter" || !event.target.closest?.("#head-picker")) return;
    const option = document.querySelector("#head-picker li.item.active[data-index]");
    if (option) showHead(Number(option.dataset.index));
  }, true);

  function ask(where, event, data) {
    // The server asked through a plot's typed event (`where`: the plot's card, or the element itself).
    const plot = typeof where === "string" ? document.querySelector(where) : where;
    plot?.dispatchEvent(new CustomEvent("ask-server", { detail: { event, data } }));
    return Boolean(plot);
  }

  // A head the view drew (picked in the head picker, or a thumbnail clicked; the picker follows by the
  // view's own event): the views that follow it.
  document.addEventListener("head-shown", ({ detail: { layer, head } }) => follow(layer, head));
  document.addEventListener("head-wanted", ({ detail: { layer, head } }) => {
    if (currentHead() !== head) ask(layerView(), "head_picked", { layer, head }); // the server sets the picker too
    else if (ask(layerView(), "follow", followed({ layer, head, layerChanged: unfollowed?.layerChanged }, false))) {
      unfollowed = null; // picked in the picker: the server draws it and what follows it
    }
  });
  let drawnLayer = null; // the layer the view drew last
  document.addEventListener("layer-drawn", ({ detail: { layer, head, followed } }) => {
    if (!followed) follow(layer, head, true); // kept or asked for by the view: what follows is the page's to ask
    else if (layer !== drawnLayer) unfollowed = null; // the event that sent the layer drew what follows it
    drawnLayer = layer;
    // A head picked while the layer's update was on its way is drawn from it; a link's cell opens.
    if (currentHead() !== head) showHead(currentHead());
    openLinkCell();
    openPendingCell(layer);
  });

  // The views that follow the head on other tabs (RoPE's q and k, the zoom, the generation's rows), and
  // after a layer the view drew from those it keeps, the layer's (GQA's head similarity, the
  // faithfulness check): on screen, asked for at once (the view's `follow`, one event); off screen,
  // when their tab is opened.
  const FOLLOWERS = "#rope-rotation-plot, #zoom-plot, #generation-plot";
  const LAYER_FOLLOWERS = "#similarity-plot, #faithfulness-plot";
  let unfollowed = null; // {layer, head, layerChanged}: what the followers off screen have not been drawn for

  function follow(layer, head, layerChanged = false) {
    unfollowed = { layer, head, layerChanged: layerChanged || Boolean(unfollowed?.layerChanged) };
    askFollowers();
  }

  function followed({ layer, head, layerChanged }, drawn) {
    // What `follow` asks by: the layer and head, whether the view drew the head, whether the layer's
    // own views are wanted too.
    return { layer, head, drawn, layer_changed: Boolean(layerChanged) };
  }

  function askFollowers() {
    // One event for every follower, once one is on screen.
    if (!unfollowed) return;
    const watched = unfollowed.layerChanged ? `${FOLLOWERS}, ${LAYER_FOLLOWERS}` : FOLLOWERS;
    const onScreen = [...document.querySelectorAll(watched)].some((view) => view.offsetParent !== null);
    if (onScreen && ask(layerView(), "follow", followed(unfollowed, true))) unfollowed = null;
  }

  // A tab opened: the followers on it are asked for, once on screen (a tab's first opening mounts
  // them, drawing what they held).
  document.addEventListener("click", (event) => {
    if (event.target.closest && event.target.closest("[role=tab], .tab-container button")) setTimeout(askFollowers, 0);
  });
  document.addEventListener("plot-drawn", (event) => {
    if (unfollowed && event.target.matches(`${FOLLOWERS}, ${LAYER_FOLLOWERS}`)) askFollowers();
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

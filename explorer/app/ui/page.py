"""The page's own style and script (explorer/app/ui/assets: page.css, page.js), carried by an empty
gr.HTML so they reach the page however the app is launched (`python app.py`, `gradio app.py`, a
Space); and the page itself, a gr.Blocks that keeps no run history in the browser, takes no upload
larger than its one file (a CSV of pairs), and serves its queue in fair shares."""

from __future__ import annotations

from pathlib import Path

import gradio as gr
from starlette.middleware import Middleware

from explorer.app.circuit_pairs import MAX_BYTES
from explorer.app.fair_queue import Function, QueueShares
from explorer.app.queue_middleware import FairQueue
from explorer.app.visitors import Proxies

ASSETS = Path(__file__).resolve().parent / "assets"


def assets() -> gr.HTML:
    css = (ASSETS / "page.css").read_text(encoding="utf-8")
    script = (ASSETS / "page.js").read_text(encoding="utf-8")
    return gr.HTML("", head=f"<style>{css}</style>", js_on_load=script, padding=False, elem_id="page-assets")


class Page(gr.Blocks):
    """The app's gr.Blocks, launched without Gradio's run history and with uploads of MAX_BYTES at most
    by default, and with its queue's joins admitted by `shares` (`explorer.app.fair_queue`; `proxies`:
    who stands between visitors and the app, for their addresses). Gradio's run history keeps every
    event's outputs in the browser's localStorage (up to 100 events): here a megabyte of figures per
    event, parsed and written again at each message of each event, about a quarter of a second of the
    page's time per layer switch, and a store of everything typed into the prompt."""

    def __init__(self, *args, shares: QueueShares, proxies: Proxies, **kwargs):
        super().__init__(*args, **kwargs)
        self.shares, self.proxies = shares, proxies

    def launch(
        self,
        *args,
        run_history: bool = False,
        max_file_size: int | str | None = MAX_BYTES,
        app_kwargs: dict | None = None,
        **kwargs,
    ):
        fair = Middleware(FairQueue, shares=self.shares, proxies=self.proxies, functions=self.functions())
        app_kwargs = {**(app_kwargs or {}), "middleware": [*(app_kwargs or {}).get("middleware", []), fair]}
        return super().launch(
            *args, run_history=run_history, max_file_size=max_file_size, app_kwargs=app_kwargs, **kwargs
        )

    def functions(self) -> dict[str, Function]:
        """Each queued function as a join names it (its index, its API name) -> its index and its
        concurrency id, which the events that call one handler share."""
        named = {}
        for index, fn in self.fns.items():
            if fn.fn is not None and fn.queue is not False:
                function = Function(index, str(fn.concurrency_id))
                named[str(index)] = function
                if isinstance(fn.api_name, str) and fn.api_name:
                    named[fn.api_name] = function
        return named

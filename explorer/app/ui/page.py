"""The page's own style and script (explorer/app/ui/assets: page.css, page.js), carried by an empty
gr.HTML so they reach the page however the app is launched (`python app.py`, `gradio app.py`, a
Space); and the page itself, a gr.Blocks that keeps no run history in the browser and serves its
queue in fair shares."""

from __future__ import annotations

from pathlib import Path

import gradio as gr
from starlette.middleware import Middleware

from explorer.app.fair_queue import FairQueue, QueueShares

ASSETS = Path(__file__).resolve().parent / "assets"


def assets() -> gr.HTML:
    css = (ASSETS / "page.css").read_text(encoding="utf-8")
    script = (ASSETS / "page.js").read_text(encoding="utf-8")
    return gr.HTML("", head=f"<style>{css}</style>", js_on_load=script, padding=False, elem_id="page-assets")


class Page(gr.Blocks):
    """The app's gr.Blocks, launched without Gradio's run history by default, and with its queue's
    joins admitted by `shares` (`explorer.app.fair_queue`; `behind_proxy`: visitors' addresses are
    those a Space's proxy reports). Gradio's run history keeps every event's outputs in the browser's
    localStorage (up to 100 events): here a megabyte of figures per event, parsed and written again at
    each message of each event, about a quarter of a second of the page's time per layer switch, and a
    store of everything typed into the prompt."""

    def __init__(self, *args, shares: QueueShares, behind_proxy: bool, **kwargs):
        super().__init__(*args, **kwargs)
        self.shares, self.behind_proxy = shares, behind_proxy

    def launch(self, *args, run_history: bool = False, app_kwargs: dict | None = None, **kwargs):
        fair = Middleware(FairQueue, shares=self.shares, behind_proxy=self.behind_proxy)
        app_kwargs = {**(app_kwargs or {}), "middleware": [*(app_kwargs or {}).get("middleware", []), fair]}
        return super().launch(*args, run_history=run_history, app_kwargs=app_kwargs, **kwargs)

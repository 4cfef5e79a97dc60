"""The page's own style and script (explorer/ui/assets), carried by an empty gr.HTML so they reach the
page however the app is launched (`python app.py`, `gradio app.py`, a Space)."""

from __future__ import annotations

from pathlib import Path

import gradio as gr

ASSETS = Path(__file__).resolve().parent / "assets"


def assets() -> gr.HTML:
    css = (ASSETS / "page.css").read_text(encoding="utf-8")
    script = (ASSETS / "page.js").read_text(encoding="utf-8")
    return gr.HTML("", head=f"<style>{css}</style>", js_on_load=script, padding=False, elem_id="page-assets")

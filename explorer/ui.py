"""Gradio layout and event wiring only."""

from __future__ import annotations

import gradio as gr


def build_demo() -> gr.Blocks:
    with gr.Blocks(title="Attention Explorer") as demo:
        gr.Markdown("# Attention Explorer\nThe explorer views arrive with the app issue.")
    return demo

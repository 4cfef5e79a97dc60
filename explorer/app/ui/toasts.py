"""Every toast of the page: a warning, or the error a refused value raises. Gradio draws a
toast's text as HTML, and a message may quote what a person typed or a link carried (a target of
`<img src=…>` would be fetched, a link drawn live), so each message is escaped here
(`markup.toast`), the one way the app makes a toast (tests/test_architecture.py holds it). Gradio's own
check of an event's data, which quotes whole any file path the data names, refuses through here too."""

from __future__ import annotations

import gradio as gr
from gradio import processing_utils

from explorer.app import markup


def warning(message: str) -> None:
    """A warning toast, beside the status line that says the same."""
    gr.Warning(markup.toast(message))


def info(message: str) -> None:
    """A note toast, shown while the event it belongs to is still running."""
    gr.Info(markup.toast(message))


def error(message: str) -> gr.Error:
    """The error to raise where a value is refused before its handler runs (Gradio's own check of an
    input, the data of an event): Gradio shows its message as an error toast and the app stays up."""
    return gr.Error(markup.toast(message))


def _refused_as_text(check):
    """Gradio's check that every file object an event's data names was uploaded (a typed event's data,
    before its handler reads it), refused in words of ours: Gradio's quotes the path, any text a request
    sends, as the toast's markup."""

    def checked(data):
        try:
            check(data)
        except gr.Error:
            raise error("An event's data names a file that was never uploaded here.") from None

    return checked


processing_utils.check_all_files_in_cache = _refused_as_text(processing_utils.check_all_files_in_cache)

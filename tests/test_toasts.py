"""Every toast shows its message as text: Gradio draws a toast as HTML, so the message that reaches it
is escaped (a warning, a refused value, refused event data), while the status line, which
escapes what it is given, gets the message as written (escaped once, not twice)."""

from __future__ import annotations

import gradio as gr
import pytest

from explorer.app import markup
from explorer.app.ui import inputs as checked
from explorer.app.ui.common import warn
from explorer.app.ui.layer_view import HeadData

MARKUP = "<img src=//host/t.png><a href=//evil/login>Sign in again</a>"
SHOWN = "&lt;img src=//host/t.png&gt;&lt;a href=//evil/login&gt;Sign in again&lt;/a&gt;"


def test_a_warning_reaches_gradio_escaped_and_the_status_line_escapes_it_once():
    with pytest.warns(UserWarning) as warned:  # outside an event, Gradio warns as Python does
        said = warn(ValueError(f"The target “{MARKUP}” is 9 tokens"), "read_target")
    assert str(warned[0].message) == f"The target “{SHOWN}” is 9 tokens"
    assert said == f"The target “{MARKUP}” is 9 tokens"
    assert f"“{SHOWN}”" in markup.status(said, "warning")


def test_a_message_keeps_its_quotes_for_an_api_caller_reads_it_too():
    assert markup.toast("Layer takes a number, got 'abc' & \"x\".") == (
        "Layer takes a number, got 'abc' &amp; \"x\"."
    )


def test_a_value_no_control_could_send_is_refused_with_its_markup_as_text():
    with pytest.raises(gr.Error) as refused:
        checked.Number(label="Layer").preprocess("<img src=//host/t.png>")
    assert refused.value.message == "Layer takes a number, got '&lt;img src=//host/t.png&gt;'."
    with pytest.raises(gr.Error) as refused:
        checked.Radio(["zero", "mean"], label="Ablation").preprocess("<b>x</b>")
    assert refused.value.message == "Ablation: '&lt;b&gt;x&lt;/b&gt;' is not one of its choices."


def test_event_data_is_refused_with_its_markup_as_text():
    with pytest.raises(gr.Error) as refused:
        HeadData(None, {"layer": "<img src=//host/t.png>", "head": 0})
    assert refused.value.message.endswith("got '&lt;img src=//host/t.png&gt;'.")

"""The page's inputs, as Gradio's, but answering a value no control could send with a clear message.

Gradio checks an input before the handler runs, and a value of the wrong kind sent to the API (a layer
of "abc", a position of NaN, a 4,001-digit number) fails there with "the upstream Gradio app has
raised an exception"; a choice that is not one quotes itself whole and unescaped, in a toast Gradio
draws as HTML. These subclasses check the value first and refuse it as a `gr.Error` naming the control
and quoting the value briefly, escaped (`toasts.error`). They keep their class names, which Gradio's
page uses to draw them. The page builds every choice and number control from them
(tests/test_architecture.py holds it).

Gradio writes a .pyi stub beside the source of every component class defined (its own components'
editor hints); these add no events, so they are defined with that step left out, and the app never
writes into its own folder.
"""

from __future__ import annotations

import math
from contextlib import contextmanager

import gradio as gr
from gradio import component_meta

from explorer.app.ui import toasts
from explorer.engine.config import brief

LARGEST = 1e15  # no control holds a larger number; a larger one is refused before it is compared


def _name(block: gr.components.Component) -> str:
    return block.label or block.elem_id or "This control"


def _refuse_unless_number(block: gr.components.Component, payload) -> None:
    number = isinstance(payload, int | float) and not isinstance(payload, bool)
    if not number or abs(payload) > LARGEST or not math.isfinite(payload):  # (a huge int is no float)
        raise toasts.error(f"{_name(block)} takes a number, got {brief(payload)}.")


def _refuse_unless_choice(block: gr.components.Component, payload, preprocess):
    try:
        return preprocess(payload)
    except gr.Error:
        raise toasts.error(f"{_name(block)}: {brief(payload)} is not one of its choices.") from None


@contextmanager
def _no_stub_files():
    write_stub = component_meta.create_or_modify_pyi
    component_meta.create_or_modify_pyi = lambda *args: None
    try:
        yield
    finally:
        component_meta.create_or_modify_pyi = write_stub


with _no_stub_files():

    class Slider(gr.Slider):
        def preprocess(self, payload):
            _refuse_unless_number(self, payload)
            return super().preprocess(payload)

    class PositionSlider(Slider):
        """A slider over what a run or a load sets (a position of the prompt, a layer of the model): a
        value outside its range is read as its nearest end. An event sent while an earlier range stood
        can reach the server after a run or a load narrowed it, and means the same end of the new one.
        Drawn as its base, a slider (Gradio's `is_template`)."""

        is_template = True

        def preprocess(self, payload):
            _refuse_unless_number(self, payload)
            return super().preprocess(min(max(payload, self.minimum), self.maximum))

    class Number(gr.Number):
        def preprocess(self, payload):
            if payload is not None:
                _refuse_unless_number(self, payload)
            return super().preprocess(payload)

    class Dropdown(gr.Dropdown):
        def preprocess(self, payload):
            many = isinstance(payload, list) and len(payload) > len(self.choices)  # each is looked up
            if many and not self.allow_custom_value:
                picked = f"{len(payload):,} picked of {len(self.choices):,} choices"
                raise toasts.error(f"{_name(self)}: {picked}.")
            return _refuse_unless_choice(self, payload, super().preprocess)

    class Radio(gr.Radio):
        def preprocess(self, payload):
            return _refuse_unless_choice(self, payload, super().preprocess)

    class CheckboxGroup(gr.CheckboxGroup):
        def preprocess(self, payload):
            if not isinstance(payload, list):
                raise toasts.error(f"{_name(self)} takes a list of its choices, got {brief(payload)}.")
            if len(payload) > len(self.choices):  # each is looked up among the choices
                ticked = f"{len(payload):,} ticked of {len(self.choices):,} choices"
                raise toasts.error(f"{_name(self)}: {ticked}.")
            values = [value for _, value in self.choices]
            for value in payload:  # the first value not a choice is named, not the list it is in
                if value not in values:
                    raise toasts.error(f"{_name(self)}: {brief(value)} is not one of its choices.")
            return super().preprocess(payload)

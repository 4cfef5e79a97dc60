"""A figure as plain values, and the figures API's builders of them.

A builder writes its figure as the dicts Plotly draws (`Plot`): the app sends those as they are,
with no validation of every property and no deep copy (the page draws a layer's dozen figures on each
switch). Called through the API (`explorer.figures.pipeline_figure(...)`), the same builder returns the
validated `go.Figure` for `.show()`, notebooks and the SVG/PNG export; `builder.plot(...)` is the
plain one.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, ParamSpec

import plotly.graph_objects as go

Args = ParamSpec("Args")


@dataclass(frozen=True)
class Plot:
    """A figure's traces and layout as plain dicts (numpy arrays where a property holds an array),
    written as Plotly's validation leaves them: titles as {text}, colour scales as lists (the tests
    check every figure against its validated self). `figure()` is that validated `go.Figure`."""

    data: list[dict]
    layout: dict

    def figure(self) -> go.Figure:
        return go.Figure(data=self.data, layout=self.layout)

    def show(self, *args, **kwargs) -> None:
        """Draw it (in a notebook, or a browser tab), as `go.Figure.show` does."""
        self.figure().show(*args, **kwargs)

    def _repr_mimebundle_(self, include=None, exclude=None, **kwargs):  # a notebook draws the figure
        return self.figure()._repr_mimebundle_(include, exclude, **kwargs)


class FigureBuilder(Generic[Args]):
    """A figure builder as the API offers it: called, the validated `go.Figure`; `.plot`, the `Plot`
    itself (the app's path)."""

    def __init__(self, build: Callable[Args, Plot]):
        self.plot = build
        functools.update_wrapper(self, build)
        self.__signature__ = inspect.signature(build).replace(return_annotation="go.Figure")

    def __call__(self, *args: Args.args, **kwargs: Args.kwargs) -> go.Figure:
        return self.plot(*args, **kwargs).figure()


def builds_figure(build: Callable[Args, Plot]) -> FigureBuilder[Args]:
    """Offer a `Plot` builder as a figure builder (`FigureBuilder`)."""
    return FigureBuilder(build)

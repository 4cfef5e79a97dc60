"""Events wired by name: a handler takes its inputs' values as keyword arguments named by the keys of
a dict of components, so no handler reads a value by its place in a list.

Gradio passes an event's input values positionally, in the order of its list of components, and names
the API's parameters by the handler's positional parameters. `named` gives Gradio that list, in the
dict's order (the API's order), and a function whose signature has one positional parameter per
component, named by its key, followed by the parameters Gradio fills in itself (a `gr.Request`, a
`gr.EventData`, a `gr.Progress`…), which it passes on by their names. A list of components under one
key reaches the handler as a list of their values; a dict of them, as a dict.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping, Sequence

from gradio.blocks import Blocks
from gradio.caching import Cache
from gradio.components import Component
from gradio.helpers import Progress
from gradio.utils import get_type_hints, is_special_typed_parameter

Inputs = Mapping[str, "Component | Sequence[Component] | Inputs"]


class Layout:
    """Where each value of a flat list of components goes in a dict of them: the list, a parameter
    name for each component (its key, `key_0…` within a list, `key_sub` within a dict), and the
    values rebuilt by key from the flat list."""

    def __init__(self, inputs: Inputs):
        self.components: list[Component] = []
        self.names: list[str] = []
        self._shape = self._lay_out(inputs, "")

    def _lay_out(self, value, name: str):
        if isinstance(value, Mapping):
            return {key: self._lay_out(sub, f"{name}_{key}" if name else key) for key, sub in value.items()}
        if isinstance(value, Sequence) and not isinstance(value, str):
            return [self._lay_out(sub, f"{name}_{at}") for at, sub in enumerate(value)]
        if not isinstance(value, Component):
            raise TypeError(f"input {name!r} is {value!r}, not a component")
        self.components.append(value)
        self.names.append(name)
        return len(self.components) - 1

    def values(self, flat: Sequence) -> dict:
        """The values of `flat` (one per component, in the list's order) by key."""

        def rebuilt(shape):
            if isinstance(shape, dict):
                return {key: rebuilt(sub) for key, sub in shape.items()}
            if isinstance(shape, list):
                return [rebuilt(sub) for sub in shape]
            return flat[shape]

        return rebuilt(self._shape)


def special_parameters(fn: Callable) -> list[inspect.Parameter]:
    """The parameters of `fn` that Gradio fills in itself: by annotation (a request, event data,
    OAuth, a header) or by default (progress, a cache)."""
    hints = get_type_hints(fn)
    return [
        parameter.replace(annotation=hints[name]) if name in hints else parameter
        for name, parameter in inspect.signature(fn).parameters.items()
        if is_special_typed_parameter(name, hints) or isinstance(parameter.default, Progress | Cache)
    ]


def named(handler: Callable, inputs: Inputs) -> tuple[Callable, list[Component]]:
    """`handler`, which takes each of `inputs`' values by its key (and any of Gradio's own parameters
    by its name), as the function and inputs list an event takes. A generator handler (one that
    streams) stays a generator. The function's `named_inputs` are its inputs' parameter names. A key
    that names no parameter, a parameter no key fills, or an async handler is refused as wired."""
    layout = Layout(inputs)
    # Gradio fills these in by their place after the inputs; those with defaults (progress) go last.
    specials = sorted(
        special_parameters(handler), key=lambda parameter: parameter.default is not parameter.empty
    )
    takes = inspect.signature(handler).parameters
    taken = {*inputs, *(parameter.name for parameter in specials)}
    anything = any(parameter.kind is parameter.VAR_KEYWORD for parameter in takes.values())
    missing = [
        name
        for name, parameter in takes.items()
        if name not in taken
        and parameter.default is parameter.empty
        and parameter.kind not in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD)
    ]
    unknown = [] if anything else [key for key in inputs if key not in takes]
    if missing or unknown:
        raise TypeError(
            f"{getattr(handler, '__name__', handler)} takes {list(takes)}; its inputs are {list(inputs)}"
        )
    if inspect.iscoroutinefunction(handler) or inspect.isasyncgenfunction(handler):
        raise TypeError(f"{handler.__name__} is async: the page's handlers run in Gradio's threads")
    count = len(layout.components)

    def arguments(args: tuple) -> dict:
        special = {parameter.name: value for parameter, value in zip(specials, args[count:], strict=False)}
        return layout.values(args[:count]) | special

    if inspect.isgeneratorfunction(handler):

        def fn(*args):
            yield from handler(**arguments(args))

    else:

        def fn(*args):
            return handler(**arguments(args))

    plain = inspect.Parameter.POSITIONAL_OR_KEYWORD
    parameters = [inspect.Parameter(name, plain) for name in layout.names]
    parameters += [parameter.replace(kind=plain) for parameter in specials]
    functools.update_wrapper(fn, handler)  # its name, docstring (the API's description) and marks
    fn.__signature__ = inspect.Signature(parameters)  # what Gradio reads, not the handler's
    fn.__annotations__ = {p.name: p.annotation for p in specials if p.annotation is not p.empty}
    fn.named_inputs = tuple(layout.names)
    return fn, layout.components


def grouped_by_handler(demo: Blocks) -> None:
    """The events of one handler in one concurrency group of the queue, as when each was given the
    handler itself: Gradio's default group is the event's function (`id(fn)`), and `named` gives each
    event a function of its own. Run once the page is wired, before its functions are wrapped again."""
    for event in demo.fns.values():
        handler = getattr(event.fn, "__wrapped__", None)
        if hasattr(event.fn, "named_inputs") and event.concurrency_id == str(id(event.fn)):
            event.concurrency_id = str(id(handler))

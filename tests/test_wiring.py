"""Events wired by name (`explorer.app.ui.wiring.named`): each handler gets each input's value under
its key, through Gradio's own call, whatever the order of the keys; Gradio sees one positional
parameter per component, and its own parameters (a request, event data, progress) still reach the
handler, through the wrappers the page puts around every handler."""

from __future__ import annotations

import asyncio
import inspect

import gradio as gr
import pytest
from gradio.utils import get_positional_input_parameters

from explorer.app import limits
from explorer.app.ui.common import guarded
from explorer.app.ui.wiring import grouped_by_handler, named


def called(demo: gr.Blocks, values: list, event_data=None):
    """What the demo's one event returns for `values` (one per input, in its list's order), called as
    Gradio calls it from the queue; a stream's updates, in a list."""
    (block_fn,) = demo.fns.values()

    async def call():
        if not block_fn.types_generator:
            return (await demo.call_function(block_fn, list(values), event_data=event_data))["prediction"]
        done, iterator = [], None
        while True:
            output = await demo.call_function(block_fn, list(values), iterator, event_data=event_data)
            iterator = output["iterator"]
            if iterator is None or output["prediction"] == gr.skip() or output["is_generating"] is False:
                break
            done.append(output["prediction"])
        return done

    return asyncio.run(call())


def test_each_value_reaches_the_parameter_its_key_names_in_any_order():
    with gr.Blocks() as demo:
        layer, head, query = gr.Number(), gr.Number(), gr.Number()
        out = gr.Textbox()

        def handler(query, layer, head):
            return f"{layer}/{head}/{query}"

        fn, inputs = named(handler, {"layer": layer, "head": head, "query": query})
        gr.Button().click(fn, inputs, out)
    assert inputs == [layer, head, query]
    assert called(demo, [1, 2, 3]) == "1/2/3"
    assert fn.named_inputs == ("layer", "head", "query")


def test_lists_and_dicts_of_inputs_arrive_as_lists_and_dicts_under_their_key():
    with gr.Blocks() as demo:
        a, b, c, d = gr.Number(), gr.Number(), gr.Number(), gr.Number()
        out = gr.JSON()

        def handler(first, window, follower):
            return {"first": first, "window": window, "follower": follower}

        fn, inputs = named(handler, {"first": a, "window": [b, c], "follower": {"at": d, "none": {}}})
        gr.Button().click(fn, inputs, out)
    assert inputs == [a, b, c, d]
    assert fn.named_inputs == ("first", "window_0", "window_1", "follower_at")
    assert called(demo, [1, 2, 3, 4]) == {"first": 1, "window": [2, 3], "follower": {"at": 4, "none": {}}}


def test_gradio_sees_one_named_positional_parameter_per_input_through_every_wrapper():
    status = gr.HTML(render=False)

    def handler(request: gr.Request, shown, layer, progress=gr.Progress()):
        return {}

    fn, _ = named(guarded(status)(handler), {"layer": gr.Number(render=False), "shown": gr.State()})
    wrapped = limits.bounded(fn, 5.0)
    for seen in (fn, wrapped):
        assert [p.name for p in get_positional_input_parameters(seen)] == ["layer", "shown"]
        assert list(inspect.signature(seen).parameters) == ["layer", "shown", "request", "progress"]
        assert seen.named_inputs == ("layer", "shown")


def test_a_request_and_event_data_reach_the_handler_by_name():
    with gr.Blocks() as demo:
        layer, shown = gr.Number(), gr.Textbox()
        out = gr.JSON()

        def handler(picked: gr.SelectData, shown, request: gr.Request, layer):
            return {"index": picked.index, "layer": layer, "shown": shown, "request": request is None}

        fn, inputs = named(handler, {"layer": layer, "shown": shown})
        gr.Button().click(fn, inputs, out)
    data = gr.EventData(None, {"index": 7, "value": "x"})
    assert called(demo, [2, "on"], data) == {"index": 7, "layer": 2, "shown": "on", "request": True}


def test_a_streaming_handler_stays_a_generator_that_streams():
    with gr.Blocks() as demo:
        start, stop = gr.Number(), gr.Number()
        out = gr.Number()

        def count(stop, start):
            yield from range(int(start), int(stop))

        fn, inputs = named(guarded(out)(count), {"start": start, "stop": stop})
        gr.Button().click(fn, inputs, out)
    assert inspect.isgeneratorfunction(fn)
    assert inspect.isgeneratorfunction(limits.bounded(fn, 5.0))
    assert called(demo, [2, 5]) == [2, 3, 4]


def test_keys_naming_no_parameter_parameters_no_key_fills_and_async_are_refused_as_wired():
    def handler(layer, head):
        return {}

    with pytest.raises(TypeError, match="inputs are"):
        named(handler, {"layer": gr.Number(render=False), "heads": gr.Number(render=False)})
    with pytest.raises(TypeError, match="inputs are"):
        named(handler, {"layer": gr.Number(render=False)})
    with pytest.raises(TypeError, match="not a component"):
        named(handler, {"layer": gr.Number(render=False), "head": 3})

    async def later(layer):
        return {}

    with pytest.raises(TypeError, match="async"):
        named(later, {"layer": gr.Number(render=False)})


def test_the_events_of_one_handler_share_its_concurrency_group_and_no_other_handlers():
    def handler(a, b):
        return a

    def other(a, b):
        return b

    with gr.Blocks() as demo:
        a, b, out = gr.Number(), gr.Number(), gr.Number()
        for fn in (handler, handler, other):
            gr.Button().click(*named(fn, {"a": a, "b": b}), out)
        gr.Button().click(*named(handler, {"a": a, "b": b}), out, concurrency_id="kept")
    grouped_by_handler(demo)
    first, second, third, kept = (event.concurrency_id for event in demo.fns.values())
    assert first == second != third and kept == "kept"

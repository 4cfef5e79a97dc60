"""What every view shares, wired on the page (the handlers are `events.ViewEvents`'), one idea a method:

- `tabs`: each tab's opening takes the old view's link away and is kept for links; the Overview, the
  lens and the flow close when another tab opens;
- `loading`: a model picked and loaded, and a link's view restored when the page opens;
- `runs`: the prompt's run (Run, Enter, an example, a model loaded, a link, a generation shown), and
  the link's RoPE positions after its run;
- `switches`: the layer and head pickers, which the layer view draws from (`layer_packs`), the API's
  /layer and /head, and a head of another layer picked in the page;
- `chained`: each tab's own events, chained after the runs and the switches, and the link's copy.
"""

from __future__ import annotations

import gradio as gr

from explorer.app.ui import intervene, layer_view, model_loading, share
from explorer.app.ui.common import EACH_TRIGGER, AfterRuns, Handler, gpu, guarded
from explorer.app.ui.events import ViewEvents
from explorer.app.ui.wiring import named


class PageWiring:
    """`ViewEvents`' handlers wired on `demo` (`copy_link`: the button that copies the view's link)."""

    def __init__(self, events: ViewEvents, demo: gr.Blocks, copy_link: gr.Button):
        self.events, self.demo, self.copy_link = events, demo, copy_link
        self.s, self.c, self.t, self.link = events.shared, events.controls, events.tabs, events.link
        # Progress shows on the status line alone: on every plot, each would run a timer of its own,
        # redrawn every frame while the plots are being drawn.
        self.progress = dict(show_progress_on=self.s.status)

    def wire(self) -> None:
        self.tabs()
        loader, restored = self.loading()
        run_handler, runs = self.runs(loader, restored)
        redraw = self.switches()
        self.chained(loader, run_handler, redraw, runs)

    def tabs(self) -> None:
        c, t, link = self.c, self.t, self.link
        every_tab = t.each()
        t.overview.close_when([tab for tab in every_tab if tab is not t.overview.tab])
        for drawn_open in (t.lens, t.flow):
            drawn_open.close_when([tab for tab in every_tab if tab is not drawn_open.tab])
        for tab, name in zip(every_tab, share.TABS, strict=True):
            tab.select(None, None, link, js="() => ''", api_name=False)  # in the page: the old link goes
            tab.select(lambda name=name: name, None, c.current_tab, api_name=False, queue=False)

    def loading(self) -> tuple[model_loading.Loader, object]:
        """The model picker's loader, and the page's load restoring a link's controls (the event the
        link's run chains after)."""
        s, c, t = self.s, self.c, self.t
        model_views = model_loading.ModelViews(
            status=s.status,
            model=c.model,
            card=c.model_card,
            layer=s.layer,
            head=s.head,
            gqa=t.gqa.diagram,
            kv_cache=t.gqa.kv_cache,
            shown=s.shown,
        )
        self.link_refusal = gr.State(None)  # why the model a link names could not load
        loader = model_loading.Loader(self.events.workspace, c.picker, model_views, self.link_refusal, s.jobs)
        self.link_notes = gr.State("")  # what of a link's layer and head the model could not take
        restored = share.RestoredControls(
            linked=share.LinkedControls.of_page(s, c, t),
            notes=self.link_notes,
            overview_open=t.overview.is_open,
            log_box=t.attention.log_box,
            weighted_box=t.attention.weighted_box,
            steer=t.generate.steer,
        ).wire(
            self.demo.load(loader.restore, c.model, loader.restore_outputs, api_name=False),
            self.events.workspace,
            c.model,
        )
        # The link's tab is opened in the page, as a click would: were the tabs an output of any event,
        # Gradio would copy the state of every component inside them at each of every later event's
        # status messages (~15 ms of a layer switch at 256 tokens).
        restored.then(None, js=share.OPEN_TAB_JS)
        return loader, restored

    def runs(self, loader: model_loading.Loader, restored) -> tuple[Handler, list]:
        """The run's handler, and every event that runs the prompt (what chains after a run)."""
        e, s, c, t = self.events, self.s, self.c, self.t
        run_prompt = gpu(guarded(s.status)(e.run_prompt))
        run_handler = Handler(run_prompt, e.run_inputs, e.run_outputs)
        linked = {
            "layer": s.layer,
            "head": s.head,
            "shown": s.shown,
            "refusal": self.link_refusal,
            "notes": self.link_notes,
        }
        runs = [
            gr.on(
                [c.run_button.click, c.prompt.submit],
                *named(run_prompt, e.run_inputs),
                e.run_outputs,
                api_name="run",
                **self.progress,
            ),
            run_handler.after(c.examples.load_input_event),
            *(run_handler.after(loaded) for loaded in loader.wire(c.load_button, c.model)),
            run_handler.after(restored).then(
                *named(gpu(guarded(s.status)(e.restore_positions)), linked),
                [s.status, t.rope.query, t.rope.key, t.rope.rotation, t.rope.split],
                api_name=False,
            ),
            t.generate.show_with(s, run_handler),
        ]
        return run_handler, runs

    def switches(self) -> Handler:
        """The layer and head switches; the layer's redraw, for the tabs that show another run."""
        e, s, t, link = self.events, self.s, self.t, self.link
        # A move of the layer picker is the layer view's: a layer it keeps (one beside the layer drawn)
        # it draws with no request, any other it asks for through its server function (`layer_packs`);
        # either way the views that follow the layer ask, when on screen. The API's /layer redraws the
        # layer's views in one call, from a trigger of its own that the page never shows.
        e.packs.serve(t.attention.pipeline)
        # The page's function takes its inputs' values in the list's order: (layer, head).
        s.layer.input(None, [s.layer, s.head], link, js=layer_view.SHOW_LAYER_JS, api_name=False)
        layer_api = gr.Button(visible=False, elem_id="layer-api")
        redraw_layer = gpu(guarded(s.status)(e.redraw_layer))
        layer_api.click(
            *named(redraw_layer, e.switch_inputs), e.layer_outputs, api_name="layer", **self.progress
        )
        # A pick in the dropdown (`select`, fired once; its `input` fires again on the blur after it), a
        # thumbnail's or an Overview cell's of the layer on screen: the page draws the head's pipeline
        # from the layer's update, with no request, and takes the old view's link away. The head lives in
        # the picker, which every later event reads.
        pipeline = t.attention.pipeline
        s.head.select(None, s.head, link, js=layer_view.SHOW_HEAD_JS, api_name=False)
        pipeline.head_shown(  # the page's function returns its outputs in the list's order: (head, link)
            None, None, [s.head, link], js=layer_view.SHOWN_HEAD_JS, api_name=False
        )
        # What the page asks of a head, as the layer view's events: what follows it, or a pick elsewhere.
        page_asks = dict(**EACH_TRIGGER, **self.progress)
        pipeline.follow(
            *named(gpu(guarded(s.status)(e.follow_head)), e.switch_inputs),
            e.follow_outputs,
            api_name="head",
            **page_asks,
        )
        pipeline.head_picked(
            *named(gpu(guarded(s.status)(e.pick)), e.asked_by),
            [s.status, s.layer, s.head, *e.head_plots, *e.layer_plots, *e.followers.outputs],
            api_name=False,
            **page_asks,
        )
        return Handler(redraw_layer, e.switch_inputs, e.layer_outputs)

    def chained(self, loader, run_handler: Handler, redraw: Handler, runs: list) -> None:
        """Each tab's own events, chained after the runs (and, for Intervene, the layer's redraw); the
        view's link taken away as the RoPE positions move, and copied."""
        e, s, c, t = self.events, self.s, self.c, self.t
        parts = intervene.PageParts(
            prompt=c.prompt,
            picker=c.picker,
            model=c.model,
            loader=loader,
            overview=t.overview,
            run=run_handler,
            redraw=redraw,
        )
        t.intervene.wire(s, parts, runs)
        t.attention.why.wire_knockout(s, t.intervene.stale, intervene.redraw_if, runs)
        AfterRuns.wired(s, [t.lens, t.flow]).chain(runs)
        t.circuit.wire(s, self.demo, c.model, c.prompt, run_handler, runs)
        t.attention.wire_style(s, e.stale, e.packs)
        # Moving the RoPE positions changes the view a link names: the page takes the old link away.
        gr.on([t.rope.query.input, t.rope.key.input], None, None, self.link, js="() => ''", api_name=False)
        share.LinkedControls.of_page(s, c, t).wire_copy(self.copy_link, self.link)

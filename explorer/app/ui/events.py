"""What every view shares, wired: Run, a layer or head switch, a picked head, how maps are drawn, links.

Run (or an example, Enter in the prompt, a model loaded, a link) runs the prompt: one fast forward per
(model, prompt). A layer switch is the layer view's (`layer_packs`): a layer it keeps (one beside the
layer drawn, asked for once the page is idle) it draws with no request; any other it asks for through
its one server function, which computes one eager layer at most, never a forward. Each layer drawn
asks for its other heads once drawn, so a head switch is then the page's alone. The page then asks the
server only for the views that follow the layer and head on screen (RoPE's, the zoom, the generation's
rows, the layer's similarity and faithfulness: `follow`), one event for all of them. A click on an
Overview cell or a head's thumbnail does a switch too; a head of another layer picked in the page is
one event (`head_picked`) for its figures and their followers. A link (`?prompt=…&layer=…`) opens that
view. The API's /layer and /head redraw a switch's views in one call. A rejected input warns and leaves
what is on screen in place (`guarded`).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import gradio as gr

from explorer import views
from explorer.app import markup, remote
from explorer.app.policy import Policy
from explorer.app.ui import (
    attention,
    circuit,
    faithfulness,
    flow,
    generate,
    gqa,
    intervene,
    lens,
    overview,
    rope,
    share,
    toasts,
)
from explorer.app.ui.common import (
    Controls,
    Follower,
    Followers,
    Shared,
    index,
    picked_head,
    pipeline_plot,
    plot,
    plots,
    rope_plots,
    top,
)
from explorer.app.ui.layer_packs import LayerPacks
from explorer.app.ui.layer_view import FollowData, HeadData
from explorer.app.workspace import Workspace
from explorer.engine.run import Run


@dataclass(frozen=True, kw_only=True)
class Tabs:
    attention: attention.AttentionTab
    rope: rope.RopeTab
    gqa: gqa.GqaTab
    faithfulness: faithfulness.FaithfulnessTab
    overview: overview.OverviewTab
    intervene: intervene.InterveneTab
    generate: generate.GenerateTab
    lens: lens.LensTab
    flow: flow.FlowTab
    circuit: circuit.CircuitTab

    def each(self) -> list[gr.Tab]:
        """Every tab, in the order of `share.TABS` (the fields' order)."""
        return [getattr(self, field.name).tab for field in fields(self)]


EMPTY_PROMPT = "The prompt is empty: type one and press Run (or Enter) to see its attention."


def truncation_message(run: Run, policy: Policy) -> str:
    """Why the run's prompt was cut ('' when it was not), as the status line and token strip say it."""
    context = run.config.context_length
    return markup.truncation(run.n_tokens, run.n_dropped, run.n_chars_dropped, context, policy.max_tokens)


class ViewEvents:
    """The handlers of what every view shares (wired on the page by `page_wiring`). Outputs, in order:

    - a run: status, token strip, what is shown, the RoPE positions and model views, the head's and the
      layer's figures (`views.head_figures`, `views.layer_figures`), the Overview, the zoom's window;
    - a switch: status, the head's figures (and for a layer, the layer's), the followers' views.

    Each handler returns the updates of those that change, keyed by component. The lists keep their
    order for the API, whose callers read the outputs in it (the status line first).
    """

    def __init__(
        self, workspace: Workspace, shared: Shared, controls: Controls, tabs: Tabs, link: gr.Textbox
    ):
        self.workspace, self.shared, self.controls, self.tabs = workspace, shared, controls, tabs
        self.link = link
        self.packs = LayerPacks(workspace)  # what the layer view asks of the views sent to it
        s, t = shared, tabs
        # What was offered for the view before: a link (downloads go at once). Whatever changes the view
        # takes them away, so nothing on screen belongs to another view.
        self.stale = [link]
        self.head_plots = [t.attention.pipeline, t.rope.rotation, t.rope.split]  # views.head_figures
        # views.layer_figures less every head's thumbnails, which the layer view draws with the pipeline
        self.layer_plots = [t.gqa.similarity, t.faithfulness.check]
        # Views of other tabs that follow the layer and head, redrawn by the switch's own event.
        stale = Follower({}, self.stale, lambda layer, head: self.link_taken_away())
        self.followers = Followers(
            {"zoom": t.attention.follower(s), "generation": t.generate.follower, "stale": stale}
        )
        self.run_outputs = [s.status, controls.token_strip, s.shown, t.rope.query, t.rope.key, t.rope.angles]
        self.run_outputs += [t.rope.wavelengths, *self.head_plots, *self.layer_plots]
        self.run_outputs += t.overview.outputs
        self.run_outputs += [*t.attention.window, t.attention.zoom]  # the zoom's window moves to the new run
        self.run_outputs += self.stale
        self.run_inputs = {
            "text": controls.prompt,
            "model": controls.model,
            "layer": s.layer,
            "head": s.head,
            "overview_on": t.overview.is_open,
            "shown": s.shown,
            "style": s.map_style,
            "zoom_open": t.attention.zoom_open,
        }
        # What the head's views read (`asked_by`), and the layer's and head's pickers before them.
        self.asked_by = {"query": t.rope.query, "key": t.rope.key, "shown": s.shown, "style": s.map_style}
        self.asked_by["followed"] = self.followers.inputs
        self.switch_inputs = {"layer": s.layer, "head": s.head, **self.asked_by}
        self.layer_outputs = [s.status, *self.head_plots, *self.layer_plots, *self.followers.outputs]
        self.follow_outputs = [s.status, *self.head_plots, *self.layer_plots, *self.followers.outputs]

    # --- handlers -----------------------------------------------------------------------------------

    def link_taken_away(self) -> dict:
        """The updates that take away the view's link: it belongs to a view gone."""
        return dict.fromkeys(self.stale, "")

    def run_prompt(self, text, model, layer, head, overview_on, shown, style, zoom_open):
        """Every view of the prompt: its run (one fast forward, or none when cached), drawn; the head's
        pipeline alone, its other heads asked for by the page once drawn."""
        if shown == (model, text):
            return {}
        if isinstance(text, str) and not text.strip():  # (a generation's key, from Show, is no text)
            return self.views_cleared()
        # a forward to come on NDIF: what it will move is said before it is sent ('' for a model here)
        explorer = self.workspace.explorer(model, load=False)
        note = remote.estimate_note(explorer, text, self.workspace.policy.max_tokens)
        if note and self.workspace.held_run(model, text) is None:
            toasts.info(note)
        run = (cached := self.workspace.cached_run(model, text)).run
        message = f"{run.n_tokens} tokens, one fast forward in {run.forward_seconds * 1e3:.0f} ms."
        message += remote.moved_note(run)
        cut = truncation_message(run, self.workspace.policy)
        if cut:
            message = cut
            toasts.warning(message)
        layer, head = index(layer, "layer"), index(head, "head")
        query, key = views.default_positions(run)
        s, t = self.shared, self.tabs
        drawn_overview = overview.figures(cached) if overview_on else overview.EMPTY
        return {
            s.status: markup.status(message, "warning" if cut else "info"),
            self.controls.token_strip: markup.token_strip(run.tokens, cut),
            s.shown: (model, cached.text),  # the text the run read: a session keeps no 50 MB paste
            t.rope.query: gr.update(maximum=top(run.n_tokens), value=query),
            t.rope.key: gr.update(maximum=top(run.n_tokens), value=key),
            t.rope.angles: plot(views.rope_angles(run)),
            t.rope.wavelengths: plot(views.rope_wavelengths(run)),
            **self._layer_figures(run, (model, cached.text), layer, head, query, key, style),
            **dict(zip(t.overview.outputs, drawn_overview, strict=True)),
            **t.attention.after_run(run, layer, head, zoom_open, style),
            **self.link_taken_away(),
        }

    def views_cleared(self) -> dict:
        """The run's updates for an empty prompt: the views of an earlier prompt go (every plot, the
        strip, the Overview's lists, a download and a link); the sliders and the zoom's window stay."""
        t = self.tabs
        kept = {t.rope.query, t.rope.key, *t.attention.window}
        updates = {component: None for component in self.run_outputs if component not in kept}
        updates[self.shared.status] = markup.status(EMPTY_PROMPT, "info")
        return updates | {self.controls.token_strip: "", t.overview.top: "", self.link: ""}

    def redraw_layer(self, layer, head, query, key, shown, style, followed) -> dict:
        """The head's and the layer's figures, and the followers', for another layer (/layer, and the
        views redrawn for another run)."""
        if shown is None:
            return {}
        layer, head = index(layer, "layer"), index(head, "head")
        run = self.workspace.run(*shown)
        query, key = index(query, "query position"), index(key, "key position")
        figures = self._layer_figures(run, shown, layer, head, query, key, style)
        return figures | self.followers.update(layer, head, followed)

    def follow_head(self, asked: FollowData, layer, head, query, key, shown, style, followed) -> dict:
        """After a head or layer switch in the page: the views that follow them elsewhere, when one is
        on screen (the page asks, through the layer view's `follow`): RoPE's view of q and k, the zoom,
        the generation's rows; the layer's similarity and faithfulness where the layer changed in the
        page; and the head's pipeline itself where the page does not hold it. The layer and head are the
        event's, or the pickers' for an API call."""
        if shown is None:
            return {}
        run = self.workspace.run(*shown)
        layer, head = picked_head(run, *asked.override(layer, head))
        query, key = index(query, "query position"), index(key, "key position")
        pipeline, rotation, split = self.head_plots
        updates = {}
        if not asked.drawn:  # the page says whether the view drew the head (an API call: it did not)
            updates[pipeline] = self.packs.remember(pipeline_plot(run, layer, head, style), shown, style)
        updates |= dict(zip((rotation, split), rope_plots(run, layer, head, query, key), strict=True))
        if asked.layer_changed:  # the page drew the layer: its own views follow it too
            layer_figures = plots(views.layer_figures(run, layer, style), run, layer)[1:]
            updates |= dict(zip(self.layer_plots, layer_figures, strict=True))
        return updates | self.followers.update(layer, head, followed)

    def pick(self, asked: HeadData, query, key, shown, style, followed) -> dict:
        """A head of another layer than the view's picked in the page (an Overview cell, a listed top
        head, a head in a chart): its layer's figures and the pickers, through the view's `head_picked`."""
        if shown is None:
            return {}
        run = self.workspace.run(*shown)
        layer, head = picked_head(run, asked.layer, asked.head)
        query, key = index(query, "query position"), index(key, "key position")
        figures = self._layer_figures(run, shown, layer, head, query, key, style)
        picked = {self.shared.layer: layer, self.shared.head: head}
        return picked | figures | self.followers.update(layer, head, followed)

    def restore_positions(self, layer, head, shown, refusal, notes, request: gr.Request) -> dict:
        """After a link's run: the RoPE positions it names, and the figures that show them (a run
        moves them to their defaults); and, when the link's model could not load or a value of the link
        was not the model's, why, back on the status line the run wrote over."""
        asked = share.ViewState.of_params(share.requested(request))
        query, key = asked.query, asked.key
        said = []
        if refusal:
            on = "the model loaded" if shown is None else self.workspace.explorer(shown[0], load=False).name
            said.append(f"{refusal} The link's prompt is shown on {on} instead.")
        said += [notes] if notes else []
        updates = {self.shared.status: markup.status(" ".join(said), "warning")} if said else {}
        if shown is None or query is None or key is None:
            return updates
        run = self.workspace.run(*shown)
        layer, head = index(layer, "layer"), index(head, "head")
        query, key = views.clamp_position(run, query), views.clamp_position(run, key)
        rope = self.tabs.rope
        return updates | {
            rope.query: query,
            rope.key: key,
            rope.rotation: plot(views.rope_rotation(run, layer, head, query, key)),
            rope.split: plot(views.rope_score_split(run, layer, head, query, key)),
        }

    def _layer_figures(self, run: Run, shown, layer: int, head: int, query: int, key: int, style) -> dict:
        """The head's and the layer's figures, by their plots; the layer view's (`pipeline_plot`) with
        its view remembered, for what the page asks of it (`layer_packs`), as `shown` in `style`."""
        thumbnails, *layer_figures = plots(views.layer_figures(run, layer, style), run, layer)
        pipeline = self.packs.remember(pipeline_plot(run, layer, head, style, thumbnails), shown, style)
        figures = [pipeline, *rope_plots(run, layer, head, query, key), *layer_figures]
        return dict(zip([*self.head_plots, *self.layer_plots], figures, strict=True))

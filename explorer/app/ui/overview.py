"""The Overview tab: every layer and head scored on the prompt, the top heads of each score, and the
next-token distribution. Computed when the tab is opened (it reruns every layer's attention), then kept
with the run. A click on a cell or a listed head picks it; the page marks the picked cell and offers
to open it in the Attention tab (explorer/app/ui/assets/page.js)."""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr
from gradio.components.plot import PlotData

from explorer import views
from explorer.app import limits, markup
from explorer.app.kept import CachedRun
from explorer.app.ui import composition
from explorer.app.ui.common import COSTLY, Shared, gpu, guarded, plot
from explorer.app.ui.plot_view import PlotView, figure_view


@dataclass(frozen=True, kw_only=True)
class OverviewTab:
    tab: gr.Tab
    profile: PlotView  # layers × heads, one panel per score
    top: gr.HTML  # each score's top heads, as buttons that pick them
    next_tokens: PlotView
    is_open: gr.State  # whether the tab is on screen, so a new run fills it at once
    composition: composition.CompositionCard  # which heads read which heads' writes, drawn when opened

    @property
    def outputs(self) -> list:
        """What `figures` fills, in its order."""
        return [self.profile, self.top, self.next_tokens]

    def close_when(self, tabs: list[gr.Tab]) -> None:
        """Selecting any of these tabs takes the overview off screen."""
        gr.on([t.select for t in tabs], lambda: False, None, self.is_open, api_name=False, queue=False)


PICKED_BAR = (
    '<div id="overview-picked">'
    '<span id="overview-picked-text">Click a cell or a listed head to pick it.</span>'
    '<button id="open-in-attention" type="button">Open in Attention ↗</button></div>'
)
TOP_TITLES = {name: title for name, (title, _) in views.TOP_HEAD_LISTS.items()}


def figures(cached: CachedRun) -> tuple[PlotData, str, PlotData]:
    """The tab's outputs for a run (the profile, the top heads, the next tokens), its head profile
    computed once and kept with the run."""
    if cached.profile is None:
        cached.profile = views.head_profile(cached.run)
    run, profile = cached.run, cached.profile
    top = markup.top_heads(views.head_lists(run, profile), TOP_TITLES)
    return plot(views.overview(run, profile)), top, plot(views.next_tokens(run))


EMPTY = (None, "", None)  # the tab's outputs before it is opened


def build(shared: Shared) -> OverviewTab:
    with gr.Tab("Overview", id="overview", elem_id="tab-overview") as tab:
        is_open = gr.State(False)  # inside the tab: a State among gr.Tabs' children would count as a tab
        gr.HTML(PICKED_BAR, elem_id="overview-pick-bar", padding=False)
        profile = figure_view(elem_id="overview-plot")
        top = gr.HTML(elem_id="top-heads", padding=False)
        next_tokens = figure_view(elem_id="next-tokens-plot")
        card = composition.build()

    @gpu
    @guarded(shared.status)
    def open_overview(request: gr.Request, shown):
        if shown is None:
            return {is_open: True}
        cached = shared.workspace.cached_run(*shown)
        with shared.readings.reading(request, limits.overview_cost(cached.run), cached.run):
            drawn = figures(cached)
        return {is_open: True, **dict(zip([profile, top, next_tokens], drawn, strict=True))}

    outputs = [shared.status, is_open, profile, top, next_tokens]
    tab.select(open_overview, [shared.shown], outputs, api_name="overview", **COSTLY)
    card.wire(shared)
    return OverviewTab(
        tab=tab, profile=profile, top=top, next_tokens=next_tokens, is_open=is_open, composition=card
    )

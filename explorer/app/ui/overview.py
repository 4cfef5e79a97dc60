"""The Overview tab: every layer and head scored on the prompt, and the next-token distribution.
Computed when the tab is opened (it reruns every layer's attention), then kept with the run."""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr
from gradio.components.plot import PlotData

from explorer import views
from explorer.app.ui.common import Shared, gpu, guarded, plot
from explorer.app.workspace import CachedRun


@dataclass(frozen=True, kw_only=True)
class OverviewTab:
    tab: gr.Tab
    profile: gr.Plot  # layers × heads, one panel per score
    next_tokens: gr.Plot
    is_open: gr.State  # whether the tab is on screen, so a new run fills it at once

    def close_when(self, tabs: list[gr.Tab]) -> None:
        """Selecting any of these tabs takes the overview off screen."""
        gr.on([t.select for t in tabs], lambda: False, None, self.is_open, api_name=False)


def figures(cached: CachedRun) -> tuple[PlotData, PlotData]:
    """The tab's two figures for a run, its head profile computed once and kept with the run."""
    if cached.profile is None:
        cached.profile = views.head_profile(cached.run)
    return plot(views.overview(cached.run, cached.profile)), plot(views.next_tokens(cached.run))


def build(shared: Shared) -> OverviewTab:
    with gr.Tab("Overview", id="overview", elem_id="tab-overview") as tab:
        is_open = gr.State(False)  # inside the tab: a State among gr.Tabs' children would count as a tab
        profile = gr.Plot(show_label=False, elem_id="overview-plot", elem_classes="wide-plot")
        next_tokens = gr.Plot(show_label=False, elem_id="next-tokens-plot", elem_classes="wide-plot")

    @gpu
    @guarded(4)
    def open_overview(shown):
        if shown is None:
            return gr.skip(), True, gr.skip(), gr.skip()
        return gr.skip(), True, *figures(shared.workspace.cached_run(*shown))

    tab.select(
        open_overview, [shared.shown], [shared.status, is_open, profile, next_tokens], api_name="overview"
    )
    return OverviewTab(tab=tab, profile=profile, next_tokens=next_tokens, is_open=is_open)

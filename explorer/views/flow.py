"""The Flow tab's views: the information-flow graph reaching one position's output, and attention
rollout's row for the same position (`explorer.engine.flow` computes, `explorer.figures.flow` draws)."""

from __future__ import annotations

from explorer.engine import deadline
from explorer.engine.run import Run
from explorer.figures.flow import flow_figure, rollout_figure
from explorer.figures.plot import Plot
from explorer.views.labels import clamp_position

DEFAULT_THRESHOLD = 0.04  # the LLM Transparency Tool's default
GRAPH_SHARE = 0.9  # of the work, the graph's (the rollout reads one map a layer: the rest)


def flow(run: Run, position: int = -1, threshold: float = DEFAULT_THRESHOLD) -> tuple[Plot, Plot]:
    """The routes to `position`'s output at `threshold`, and the rollout row beside the graph's own
    share of the output from each token."""
    position = clamp_position(run, position % run.n_tokens)
    with deadline.part(GRAPH_SHARE):
        graph = run.information_flow(position, float(threshold))
    edges = [tuple(edge) for edge in graph.edges]
    graph_figure, by_token = flow_figure(run.tokens, edges, run.config.n_layers, position, graph.threshold)
    with deadline.part(1.0 - GRAPH_SHARE):
        row = run.rollout(position).numpy()
    return graph_figure, rollout_figure.plot(run.tokens, row, position, by_token)

"""The Flow tab's figures as a person reads them: every edge drawn as wide as the share of the output it
carries (the strongest attention route the boldest, named by its head), each marker on its edge's line,
the MLP a bracket beside its column, the legend clear of the toolbar, and rollout beside the graph's own
share of the output from each token."""

from __future__ import annotations

import numpy as np
import pytest

import explorer
from explorer import views
from explorer.figures.flow import _path, carried

PROMPT = "To be, or not to be, that is the question: whether 'tis nobler in the mind to suffer"


@pytest.fixture(scope="module")
def drawn():
    run = explorer.load(device="cpu").run(PROMPT)
    graph = run.information_flow(-1, 0.04)
    return run, graph, *(plot.figure() for plot in views.flow(run, -1, 0.04))


def test_what_each_edge_carries_is_its_weight_times_what_its_end_carries_on():
    edges = [  # layer 1: token 1's MLP keeps 0.25 and passes 0.75; attention takes 0.4 of it from token 0
        (1, 1, 1, 0.25, "mlp", ()),
        (1, 1, 1, 0.75, "mlp_residual", ()),
        (1, 0, 1, 0.4, "attention", ((2, 0.4),)),
        (1, 1, 1, 0.6, "residual", ()),
        (0, 0, 0, 1.0, "mlp_residual", ()),
        (0, 0, 0, 1.0, "residual", ()),
        (0, 1, 1, 1.0, "mlp_residual", ()),
        (0, 1, 1, 1.0, "residual", ()),
    ]
    share, by_token = carried(edges, position=1, n_layers=2)
    assert share[:4] == pytest.approx([0.25, 0.75, 0.4, 0.6])  # all of the output passes after attention
    assert by_token == pytest.approx({0: 0.4, 1: 0.6})


def distance_to_line(xs: list[float], ys: list[float], x: float, y: float) -> float:
    """How far (x, y) is from the polyline through (xs, ys)."""
    best = np.inf
    for x0, y0, x1, y1 in zip(xs, ys, xs[1:], ys[1:], strict=False):
        d = np.array([x1 - x0, y1 - y0])
        t = 0.0 if not d.any() else np.clip(np.dot([x - x0, y - y0], d) / np.dot(d, d), 0, 1)
        best = min(best, float(np.hypot(x - x0 - t * d[0], y - y0 - t * d[1])))
    return best


def test_every_marker_sits_on_its_edge_and_the_mlp_is_a_bracket_beside_its_column(drawn):
    _, graph, fig, _ = drawn
    markers = next(t for t in fig.data if t.mode == "markers" and t.customdata is not None)
    reached = sorted({e[1] for e in graph.edges} | {e[2] for e in graph.edges} | {graph.position})
    slot = {p: i for i, p in enumerate(reached)}
    for edge, x, y in zip(graph.edges, markers.x, markers.y, strict=True):
        xs, ys = _path(tuple(edge), slot)
        assert distance_to_line(xs, ys, x, y) < 1e-6, edge  # (float32 markers)
        if edge.kind == "mlp":  # a bracket on the column's right: it never crosses its column
            assert min(xs) == slot[edge.from_token] and len(xs) == 4


def test_the_strongest_attention_route_is_the_boldest_and_named_and_the_legend_clears_the_toolbar(drawn):
    run, graph, fig, _ = drawn
    share, _ = carried([tuple(e) for e in graph.edges], graph.position, run.config.n_layers)
    attention = [
        (s, e) for s, e in zip(share, graph.edges, strict=True) if e.kind == "attention" and e[1] != e[2]
    ]
    top = max(attention)[1]
    names = [a.text for a in fig.layout.annotations]
    assert names[0] == f"<b>{top.layer}.{top.heads[0][0]}</b>" and len(names) == 3
    widths = [t.line.width for t in fig.data if t.mode == "lines" and t.line.color == "#2563eb" and t.x]
    assert max(widths) == pytest.approx(1 + 9 * (7.5 / 8))  # the top bin: the strongest route's
    legend = fig.layout.legend
    assert (legend.x, legend.xanchor, legend.y, legend.yanchor) == (0, "left", 1.0, "bottom")


def test_rollout_stands_beside_the_graphs_own_share_of_each_token(drawn):
    run, graph, _, rollout = drawn
    bars = {t.name: t for t in rollout.data}
    assert set(bars) == {"attention rollout", "the graph's routes"}
    np.testing.assert_allclose(bars["attention rollout"].y, run.rollout(-1).numpy(), rtol=1e-6)
    _, by_token = carried([tuple(e) for e in graph.edges], graph.position, run.config.n_layers)
    graph_bars = np.nan_to_num(np.asarray(bars["the graph's routes"].y, dtype=np.float64))
    np.testing.assert_allclose(graph_bars, [by_token.get(i, 0.0) for i in range(run.n_tokens)], rtol=1e-6)
    assert 0 < graph_bars.sum() <= 1 + 1e-6

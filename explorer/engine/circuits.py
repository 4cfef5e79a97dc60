"""Circuits: the entry points the Explorer calls, each a dataset of prompt pairs in (`engine.pairs`) and
one of the engine's readings out: nodes patched exactly or by attribution (`engine.nodes`), edges
scored by EAP-IG (`engine.edges`), per position as a graph (`engine.graph`), and circuits measured exactly
(`engine.exact_circuits`)."""

from __future__ import annotations

import torch

from explorer.engine import edges as edge_module
from explorer.engine import exact_circuits, graph, pairs, scorecard
from explorer.engine import nodes as node_module


def patch_nodes(explorer, clean, corrupted, answer, distractor, nodes, metric, edits) -> torch.Tensor:
    data = pairs.dataset(explorer, clean, corrupted, answer, distractor, metric)
    return node_module.patch_nodes(explorer, data, list(nodes), edits)


def attribution_patching(explorer, clean, corrupted, answer, distractor, nodes, metric, qk_fix, edits):
    data = pairs.dataset(explorer, clean, corrupted, answer, distractor, metric)
    return node_module.attribution_patching(explorer, data, list(nodes), qk_fix, edits)


def edge_attribution(explorer, clean, corrupted, answers, distractors, steps, metric):
    data = pairs.dataset(explorer, clean, corrupted, answers, distractors, metric)
    return edge_module.edge_attribution(explorer, data, steps)


def circuit_metric(explorer, clean, corrupted, answer, distractor, edges, metric) -> float:
    data = pairs.dataset(explorer, clean, corrupted, answer, distractor, metric)
    return exact_circuits.circuit_metric(explorer, data, edges)


def attribution_graph(explorer, clean, corrupted, answers, distractors, steps, metric) -> graph.Graph:
    data = pairs.dataset(explorer, clean, corrupted, answers, distractors, metric)
    return graph.build(explorer, data, steps, pairs.listed_pairs(clean, corrupted, answers, distractors))


def circuit_scorecard(explorer, clean, corrupted, answers, distractors, edges, metric, fractions, resamples):
    data = pairs.dataset(explorer, clean, corrupted, answers, distractors, metric)
    options = dict(fractions=fractions, resamples=resamples)
    if isinstance(edges, graph.Graph):
        indices = (edges.rows, edges.columns, edges.positions)
        return scorecard.scorecard(explorer, data, indices=indices, n_edges=len(edges), **options)
    ranked = edges.edges if isinstance(edges, edge_module.EdgeAttribution) else list(edges)
    return scorecard.scorecard(explorer, data, ranked=ranked, **options)

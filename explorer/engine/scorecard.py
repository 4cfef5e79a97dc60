"""A circuit-discovery method scored as the MIB benchmark's circuit-localisation track scores it (Mueller
et al. 2025): the circuits of its top-ranked edges at each of MIB's kept fractions, each measured exactly
(`engine.exact_circuits`), as faithfulness f = (m(circuit) − m(none)) / (m(all) − m(none)), and two areas
over the fractions by the trapezoidal rule on a linear axis:

- CPR, the area under f (higher is better: small circuits that already recover the metric);
- CMD, the area under |1 − f| (lower is better: circuits that neither fall short nor overshoot).

A fraction keeps int(fraction × edges) edges, as MIB does; unlike MIB's, the circuits are not pruned of
edges that lead nowhere (an edge kept is kept). With positional edges (a `Graph`) the fractions are of
every positional edge. 95% intervals come from a bootstrap over the pairs: the pairs drawn again with
replacement, the clean, corrupted and circuit metrics averaged over each draw, f and both areas
recomputed from those averages.

A ranking of nodes (AtP's heads and MLPs) is scored as MIB scores node circuits, through its edges
(`ranked_by_nodes`): the circuit of the nodes scoring at least t holds every edge whose writer and
whose reader's node both do (the embedding and the logits always in), so an edge ranks by the smaller
of its two nodes' scores and each fraction's circuit is one of those node circuits, cut within its
last rank.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from explorer.engine import edges as edge_module
from explorer.engine import exact_circuits, pairs

MIB_FRACTIONS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
RESAMPLES = 1000  # bootstrap draws of the pairs


@dataclass(frozen=True)
class Scorecard:
    """A ranking of edges scored at MIB's fractions (module doc)."""

    fractions: tuple[float, ...]
    counts: list[int]  # the edges each circuit keeps
    faithfulness: list[float]  # f of each circuit, over every pair
    cpr: float
    cmd: float
    cpr_interval: tuple[float, float]  # 95%, by the bootstrap over pairs
    cmd_interval: tuple[float, float]
    clean: float  # the metric with every edge kept, and with none, averaged over the pairs
    corrupted: float
    n_pairs: int
    n_edges: int


def areas(fractions, faithfulness: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """CPR and CMD of faithfulness curves over `fractions` (trapezoids on a linear axis).
    # faithfulness [..., K] -> [...], [...]"""
    x = torch.tensor(fractions, dtype=faithfulness.dtype)
    widths = x[1:] - x[:-1]  # [K − 1]
    under = ((faithfulness[..., 1:] + faithfulness[..., :-1]) / 2 * widths).sum(-1)
    gap = (1 - faithfulness).abs()
    return under, ((gap[..., 1:] + gap[..., :-1]) / 2 * widths).sum(-1)


def scorecard(
    explorer,
    data: pairs.Dataset,
    ranked=None,
    indices=None,
    n_edges: int | None = None,
    fractions=MIB_FRACTIONS,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> Scorecard:
    """The scorecard of edges ranked best first: `ranked` (upstream, downstream[, score]) tuples, or
    `indices` as `edges.edge_indices` gives them with `n_edges` their count (a `Graph`'s arrays)."""
    if any(not 0 < f <= 1 for f in fractions) or list(fractions) != sorted(fractions):
        raise ValueError(f"fractions rise within (0, 1], got {fractions!r}")
    total = len(ranked) if indices is None else int(n_edges)
    counts = [int(f * total) for f in fractions]
    metrics = exact_circuits.pair_metrics(explorer, data, ranked, [0, *counts, total], indices)  # [2 + K, P]
    everything = metrics.mean(1)
    faithfulness = _faithfulness(everything)  # [K]
    cpr, cmd = areas(fractions, faithfulness)
    generator = torch.Generator().manual_seed(seed)
    draws = torch.randint(data.size, (resamples, data.size), generator=generator)  # [R, P]
    drawn = metrics[:, draws].mean(-1).T  # [R, 2 + K]
    cprs, cmds = areas(fractions, _faithfulness(drawn))
    return Scorecard(
        fractions=tuple(fractions),
        counts=counts,
        faithfulness=faithfulness.tolist(),
        cpr=float(cpr),
        cmd=float(cmd),
        cpr_interval=_interval(cprs),
        cmd_interval=_interval(cmds),
        clean=float(everything[-1]),
        corrupted=float(everything[0]),
        n_pairs=data.size,
        n_edges=total,
    )


def ranked_by_nodes(config, node_scores: dict[tuple, float]) -> list[tuple]:
    """Every edge ranked by its nodes (module doc), best first: (upstream, downstream, rank).
    `node_scores`: ("head", l, h) and ("mlp", l) -> a score, larger kept first (say |AtP|)."""
    always = max(node_scores.values(), default=0.0) + 1.0  # the embedding's and the logits' rank
    group = config.n_heads // config.n_kv_heads

    def writer(node: tuple) -> float:
        return always if node[0] == "embedding" else node_scores[node]

    def reader(node: tuple) -> float:
        kind, *where = node
        if kind == "logits":
            return always
        if kind == "q":
            return node_scores["head", where[0], where[1]]
        if kind in ("k", "v"):  # read by every head of the kv group: kept with any of them
            heads = range(where[1] * group, (where[1] + 1) * group)
            return max(node_scores["head", where[0], h] for h in heads)
        return node_scores["mlp", where[0]]

    ranked = [(a, b, min(writer(a), reader(b))) for a, b in edge_module.every_edge(config)]
    return sorted(ranked, key=lambda edge: -edge[2])


def _faithfulness(metrics: torch.Tensor) -> torch.Tensor:
    """f of each circuit from the metrics of none, the circuits and all.  # [..., 2 + K] -> [..., K]"""
    none, circuits, every = metrics[..., :1], metrics[..., 1:-1], metrics[..., -1:]
    return (circuits - none) / (every - none)


def _interval(values: torch.Tensor) -> tuple[float, float]:
    low, high = torch.quantile(values, torch.tensor([0.025, 0.975], dtype=values.dtype))
    return float(low), float(high)

"""MIB's circuit-localisation scores (`ex.circuit_scorecard`): the areas by the trapezoidal rule over
MIB's fractions, each circuit's faithfulness the exact circuit metric's, the curve reaching 1 with every
edge, a bootstrap interval around each area; for edge rankings and for a positional graph."""

from __future__ import annotations

import pytest
import torch

from explorer.engine.scorecard import MIB_FRACTIONS, areas

CLEAN = "To be, or not to be, that is the question: whether the"
CORRUPTED = "To be, or not or be, that is the question: whether the"
SECOND = (
    "To be, or not to be, this is the question: whether the",
    "To be, or not or be, this is the question: whether the",
)
PAIRS = ([CLEAN, SECOND[0]], [CORRUPTED, SECOND[1]], [" to", " to"], [" be", " be"])


def test_the_areas_are_trapezoids_over_mibs_fractions():
    flat = torch.ones(len(MIB_FRACTIONS), dtype=torch.float64)
    cpr, cmd = areas(MIB_FRACTIONS, flat)
    assert float(cpr) == pytest.approx(1 - 0.001) and float(cmd) == 0.0
    rising = torch.tensor(MIB_FRACTIONS, dtype=torch.float64)  # f = the fraction: ∫ x dx from 0.001 to 1
    cpr, cmd = areas(MIB_FRACTIONS, rising)
    assert float(cpr) == pytest.approx((1 - 0.001**2) / 2, rel=1e-2)
    assert float(cpr + cmd) == pytest.approx(1 - 0.001)  # f below 1 everywhere: the two areas fill the box


def test_each_circuit_is_measured_exactly_and_every_edge_recovers_all(hf_pair):
    _, ex = hf_pair
    e = ex.edge_attribution(*PAIRS, steps=3)
    card = ex.circuit_scorecard(*PAIRS, edges=e, resamples=200)
    assert card.counts == [int(f * len(e.edges)) for f in MIB_FRACTIONS] and card.n_pairs == 2
    assert card.faithfulness[-1] == pytest.approx(1.0, abs=1e-5)
    tenth = card.fractions.index(0.1)
    exact = ex.circuit_metric(*PAIRS, edges=e.edges[: card.counts[tenth]])
    assert card.faithfulness[tenth] == pytest.approx(
        (exact - card.corrupted) / (card.clean - card.corrupted), abs=1e-5
    )
    cpr, cmd = areas(card.fractions, torch.tensor(card.faithfulness, dtype=torch.float64))
    assert card.cpr == pytest.approx(float(cpr)) and card.cmd == pytest.approx(float(cmd))
    for low, high in (card.cpr_interval, card.cmd_interval):
        assert low < high  # two pairs that differ: the draws (either pair twice, or both) spread
    assert card.cmd >= 0 and card.cmd_interval[0] >= 0
    one = ex.circuit_scorecard(CLEAN, CORRUPTED, " to", " be", edges=e, resamples=50)
    assert one.cpr_interval[0] == pytest.approx(one.cpr_interval[1])  # one pair: every draw is that pair


def test_a_positional_graph_is_scored_over_every_positional_edge(hf_pair):
    _, ex = hf_pair
    g = ex.attribution_graph(*PAIRS, steps=2)
    card = ex.circuit_scorecard(*PAIRS, edges=g, fractions=(0.01, 0.1, 1.0), resamples=100)
    assert card.n_edges == len(g) and card.counts[-1] == len(g)
    assert card.faithfulness[-1] == pytest.approx(1.0, abs=1e-5)
    top = [(u, v) for u, v, _ in g.edges[: card.counts[1]]]
    exact = ex.circuit_metric(*PAIRS, edges=top)
    assert card.faithfulness[1] == pytest.approx(
        (exact - card.corrupted) / (card.clean - card.corrupted), abs=1e-5
    )
    with pytest.raises(ValueError, match="fractions rise within"):
        ex.circuit_scorecard(*PAIRS, edges=g, fractions=(0.5, 0.1))


def test_the_tools_table_gives_the_first_seeds_interval_and_every_seeds_spread():
    from explorer.tools import scorecard as tool

    rows = [
        dict(
            task=task,
            method=method,
            seed=seed,
            cpr=0.5 + 0.1 * seed,
            cmd=0.2,
            cpr_interval=(0.4, 0.6),
            cmd_interval=(0.1, 0.3),
        )
        for task in tool.TASKS
        for method in tool.METHODS
        for seed in tool.SEEDS
    ]
    text = tool.table(rows)
    row = "| ioi | EAP-IG per position | 0.500 [0.400, 0.600] | 0.200 [0.100, 0.300] | 0.700 ± 0.158 |"
    assert row + " 0.200 ± 0.000 |" in text
    assert len(text.splitlines()) == 2 + len(tool.TASKS) * len(tool.METHODS)


def test_a_node_ranking_scores_as_node_circuits_through_its_edges():
    """AtP's heads and MLPs as MIB's node circuits: the edges ranked at least t are exactly those whose
    writer and reader's node score at least t (a k or v input's node: its kv group's best head), the
    embedding and the logits always in; every valid edge once."""
    import explorer
    from explorer.engine import edges as edge_module
    from explorer.engine.scorecard import ranked_by_nodes

    config = explorer.load().config
    generator = torch.Generator().manual_seed(0)
    heads = [("head", l, h) for l in range(config.n_layers) for h in range(config.n_heads)]
    nodes = heads + [("mlp", l) for l in range(config.n_layers)]
    scores = dict(zip(nodes, torch.rand(len(nodes), generator=generator).tolist(), strict=True))
    ranked = ranked_by_nodes(config, scores)
    assert len(ranked) == int(edge_module.valid_edges(config).sum()) == len({e[:2] for e in ranked})
    assert [rank for *_, rank in ranked] == sorted((rank for *_, rank in ranked), reverse=True)
    assert ranked[0][:2] == (("embedding",), ("logits",))
    group = config.n_heads // config.n_kv_heads
    threshold = sorted(scores.values())[len(scores) // 2]
    kept = {node for node, score in scores.items() if score >= threshold} | {("embedding",)}

    def reader_kept(v) -> bool:
        if v[0] == "logits":
            return True
        if v[0] in ("k", "v"):
            return any(("head", v[1], h) in kept for h in range(v[2] * group, (v[2] + 1) * group))
        return (("head", v[1], v[2]) if v[0] == "q" else ("mlp", v[1])) in kept

    circuit = {(u, v) for u, v, rank in ranked if rank >= threshold}
    assert circuit == {(u, v) for u, v, _ in ranked if u in kept and reader_kept(v)}

"""The positional attribution graph against Hugging Face transformers with hooks (a Llama with GQA in the
fast tier; Qwen3 and Gemma 3 in the slow one): EAP with one step per position as gradient × difference;
one positional edge cut into q, k, v, an MLP and the logits, from the embedding, a head and an MLP, as a
hooked reference; every edge kept the clean run, none the corrupted one; the positions' scores summed
are `edge_attribution`'s. And the object: pruning, its JSON, and what it refuses."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

import explorer
from explorer import PromptError
from explorer.engine import edges as edge_module
from explorer.engine import prompt_sets
from tests import hf_circuits as hf

CLEAN = "To be, or not to be, that is the question: whether the"
CORRUPTED = "To be, or not or be, that is the question: whether the"
ANSWER, DISTRACTOR = " to", " be"
PAIR = (CLEAN, CORRUPTED, ANSWER, DISTRACTOR)
SECOND = (  # of the same length
    "To be, or not to be, this is the question: whether the",
    "To be, or not or be, this is the question: whether the",
    " to",
    " be",
)
CHANGED = 6  # the one token the corruption changes


def ids_of(ex, text: str) -> list[int]:
    return ex.tokenizer.encode(text, add_special_tokens=False).ids


def token(ex, text: str) -> int:
    (only,) = ids_of(ex, text)
    return only


@pytest.fixture(scope="module")
def graph(hf_pair):
    _, ex = hf_pair
    return ex.attribution_graph([CLEAN], [CORRUPTED], [ANSWER], [DISTRACTOR], steps=1)


def dense(g) -> torch.Tensor:
    """The graph's scores as [U, V, N]."""
    scores = torch.zeros(len(g.upstream), len(g.downstream), g.n_tokens)
    scores[g.rows, g.columns, g.positions] = g.scores
    return scores


def test_eap_with_one_step_per_position_is_gradient_times_difference(hf_pair, graph):
    hf_model, ex = hf_pair
    reference = hf.eap_one_step(
        hf_model,
        ex.config,
        ids_of(ex, CLEAN),
        ids_of(ex, CORRUPTED),
        token(ex, ANSWER),
        token(ex, DISTRACTOR),
    )
    reference = reference * edge_module.valid_positional(ex.config, graph.n_tokens)
    assert (dense(graph) - reference).abs().max() <= 1e-4
    assert reference.abs().max() > 1e-2
    assert len(graph) == int(edge_module.valid_positional(ex.config, graph.n_tokens).sum())
    scores = graph.scores.abs()
    assert torch.equal(scores, scores.sort(descending=True).values)
    assert graph.tokens == ex.run(CLEAN).tokens and graph.edges[0][2] == float(graph.scores[0])


def test_the_positions_scores_sum_to_edge_attributions(hf_pair):
    _, ex = hf_pair
    pairs = [list(column) for column in zip(PAIR, SECOND, strict=True)]
    g = ex.attribution_graph(*pairs, steps=3)
    whole = ex.edge_attribution(*pairs, steps=3)
    assert (dense(g).sum(-1) - whole.scores).abs().max() <= 1e-5 * (1 + whole.scores.abs().max())
    assert g.n_pairs == 2 and g.pairs[1]["clean"] == SECOND[0]


def test_every_positional_edge_kept_is_the_clean_run_and_none_the_corrupted(hf_pair, graph):
    hf_model, ex = hf_pair
    _, clean_logits = hf.record(hf_model, ids_of(ex, CLEAN))
    _, corrupted_logits = hf.record(hf_model, ids_of(ex, CORRUPTED))
    answer, distractor = token(ex, ANSWER), token(ex, DISTRACTOR)
    clean, corrupted = (float(hf.logit_diff(x, answer, distractor)) for x in (clean_logits, corrupted_logits))
    every = [(u, v) for u, v, _ in graph.edges]
    assert abs(ex.circuit_metric(*PAIR, edges=every) - clean) <= 1e-4
    assert abs(ex.circuit_metric(*PAIR, edges=[]) - corrupted) <= 1e-4
    assert abs(graph.clean - clean) <= 1e-4 and abs(graph.corrupted - corrupted) <= 1e-4
    assert abs(clean - corrupted) > 1e-2


LAST = -1  # read as the prompt's last position
CUT = [  # (writer, reader, position): one of each reader kind and each writer kind; layer 0 attends
    # within 5 positions in Gemma's sliding layers, so its writes change near the changed token alone
    (("embedding",), ("k", 1, 0), CHANGED),
    (("head", 0, 2), ("k", 1, 1), CHANGED + 2),
    (("mlp", 0), ("v", 1, 1), CHANGED + 2),
    (("head", 1, 2), ("q", 2, 5), LAST),
    (("head", 1, 4), ("mlp", 1), -3),
    (("mlp", 1), ("logits",), LAST),
]


@pytest.mark.parametrize("cut", CUT, ids=lambda cut: f"{cut[0][0]}-{cut[1][0]}")
def test_cutting_one_positional_edge_matches_a_hooked_reference(hf_pair, cut):
    """The writer's change reaches the reader at that position alone; the other positions of the same
    writer and reader stay joined, as does every other edge (kept whole, without positions)."""
    hf_model, ex = hf_pair
    up, down = edge_module.upstream_nodes(ex.config), edge_module.downstream_nodes(ex.config)
    n = len(ids_of(ex, CLEAN))
    writer, reader, at = cut
    at %= n
    others = [(up[u], down[v]) for u, v in edge_module.valid_edges(ex.config).nonzero().tolist()]
    others = [edge for edge in others if edge != (writer, reader)]
    elsewhere = [
        ((*writer, p), (*reader, p)) for p in range(n) if p != at and (reader[0] != "logits" or p == n - 1)
    ]
    clean_seen, clean_logits = hf.record(hf_model, ids_of(ex, CLEAN))
    corrupted_seen, _ = hf.record(hf_model, ids_of(ex, CORRUPTED))
    delta = torch.zeros(n, ex.config.hidden_size)
    index = up.index(writer)
    delta[at] = (hf.writes(hf_model, clean_seen) - hf.writes(hf_model, corrupted_seen))[index, at]
    edit = hf.cut_edit(hf_model, reader, delta)
    with torch.no_grad(), hf.hooks(hf_model, edit):
        logits = hf_model(torch.tensor([ids_of(ex, CLEAN)])).logits[0]
    reference = float(hf.logit_diff(logits, token(ex, ANSWER), token(ex, DISTRACTOR)))
    ours = ex.circuit_metric(*PAIR, edges=others + elsewhere)
    assert abs(ours - reference) <= 1e-4
    clean = float(hf.logit_diff(clean_logits, token(ex, ANSWER), token(ex, DISTRACTOR)))
    assert abs(reference - clean) > 1e-6  # the cut moves the metric: the test can fail


def test_the_graph_comes_back_from_its_json(graph):
    again = explorer.Graph.from_json(graph.to_json())
    for name in ("rows", "columns", "positions", "scores"):
        assert torch.equal(getattr(again, name), getattr(graph, name)), name
    for name in (
        "tokens",
        "upstream",
        "downstream",
        "metric",
        "steps",
        "clean",
        "corrupted",
        "pairs",
        "model",
    ):
        assert getattr(again, name) == getattr(graph, name), name
    heads = {(u[1], u[2]) for u, _, _ in graph.edges if u[0] == "head"}
    for layer, head in heads:
        assert torch.equal(again.attention[layer, head], graph.attention[layer, head])
    pruned = graph.pruned()
    assert explorer.Graph.from_json(pruned.to_json()).edges == pruned.edges


def test_a_json_that_is_not_a_graph_is_refused_by_name(graph):
    data = json.loads(graph.pruned().to_json())
    with pytest.raises(ValueError, match="not an Attention Explorer graph"):
        explorer.Graph.from_json(json.dumps({**data, "format": "circuit-tracer"}))
    with pytest.raises(ValueError, match="graph version 2: this Attention Explorer reads version 1"):
        explorer.Graph.from_json(json.dumps({**data, "version": 2}))
    with pytest.raises(ValueError, match="damaged"):
        explorer.Graph.from_json(json.dumps({**data, "edges": {**data["edges"], "upstream": [10**6]}}))
    with pytest.raises(ValueError, match="not a graph's JSON"):
        explorer.Graph.from_json("{")


def test_pruning_keeps_the_edges_of_most_influence_and_no_loose_ends(graph):
    pruned = graph.pruned(0.5, 0.8)
    assert 0 < len(pruned) < len(graph)
    assert set(pruned.edges) <= set(graph.edges)
    tighter = graph.pruned(0.2, 0.5)
    assert len(tighter) <= len(pruned)
    kept = {u for u, _, _ in pruned.edges}
    for _, reader, _ in pruned.edges:  # every reader feeds a kept head or MLP, or is the logits
        kind, layer, *rest = reader if reader[0] != "logits" else (*reader, None)
        if kind == "q":
            assert ("head", layer, rest[0], rest[1]) in kept
        elif kind == "mlp":
            assert ("mlp", layer, rest[0]) in kept
        elif kind in ("k", "v"):  # read by a kept head of its group at its position or after
            group = graph.attention.shape[1] // sum(1 for node in graph.downstream if node[:2] == ("k", 0))
            heads = range(rest[0] * group, (rest[0] + 1) * group)
            assert any(u[:2] == ("head", layer) and u[2] in heads and u[3] >= rest[1] for u in kept)
    for writer in kept:  # and every kept writer writes along a kept edge: none is left hanging
        assert writer[0] == "embedding" or any(u == writer for u, _, _ in pruned.edges)
    influences = [node.influence for node in pruned.nodes]
    assert influences == sorted(influences, reverse=True)
    assert {node.role for node in pruned.nodes} == {"writer", "reader"}
    with pytest.raises(ValueError, match="node_threshold is a share"):
        graph.pruned(node_threshold=0)


def test_labels_name_each_node_as_the_page_draws_it(graph):
    assert graph.label(("head", 23, 3, 4)) == "23.3"
    assert graph.label(("mlp", 12, 4)) == "MLP 12"
    assert graph.label(("logits", graph.n_tokens - 1)) == "logits"
    assert graph.label(("embedding", 1)) == f"emb {json.dumps(graph.tokens[1])}"
    assert graph.label(("k", 18, 2, 3)) == "k 18.2"


def test_positional_edges_are_refused_where_they_cannot_be(hf_pair):
    _, ex = hf_pair
    with pytest.raises(ValueError, match="not a positional edge"):
        ex.circuit_metric(*PAIR, edges=[(("head", 0, 1, 3), ("q", 1, 0, 4))])
    with pytest.raises(ValueError, match="not a positional edge"):
        ex.circuit_metric(*PAIR, edges=[(("head", 0, 1, 3), ("logits", 3))])
    with pytest.raises(ValueError, match="not a positional edge"):
        ex.circuit_metric(*PAIR, edges=[(("head", 0, 1, 3), ("q", 1, 0))])
    with pytest.raises(ValueError, match="position 99 is not one of the prompts' 26 positions"):
        ex.circuit_metric(*PAIR, edges=[(("head", 0, 1, 99), ("q", 1, 0, 99))])
    shorter = ("To be, or not to be", "To be, or not or be", " to", " be")
    pairs = [list(column) for column in zip(PAIR, shorter, strict=True)]
    n_short = len(ids_of(ex, shorter[0]))
    with pytest.raises(PromptError, match=f"pair 2 has {n_short} tokens where pair 1 has"):
        ex.attribution_graph(*pairs)
    with pytest.raises(PromptError, match="pair 2 has"):
        ex.circuit_metric(*pairs, edges=[(("head", 0, 1, 3), ("q", 1, 0, 3))])


@pytest.mark.slow
def test_smollm2s_ioi_graph_pruned_is_readable_and_recovers_half_the_difference(smollm2_explorer):
    """The built-in IOI pairs (one template, so one length) on SmolLM2: the default pruning keeps at most
    60 heads and MLPs, and its circuit, measured exactly, recovers at least half the logit difference."""
    ex = smollm2_explorer
    data = prompt_sets.ioi(8, seed=0, tokenizer=ex.tokenizer, template=0)
    g = ex.attribution_graph(*data.args(), steps=5)
    pruned = g.pruned()
    assert 10 <= len(pruned.writers()) <= 60
    metric = ex.circuit_metric(*data.args(), edges=[(u, v) for u, v, _ in pruned.edges])
    assert (metric - g.corrupted) / (g.clean - g.corrupted) >= 0.5
    last = g.n_tokens - 1
    assert any(u[0] == "head" and u[-1] == last and v[0] == "logits" for u, v, _ in pruned.edges)


def test_the_graph_is_drawn_over_its_positions_every_node_named_and_sent_as_plotly_validates_it(graph):
    """Every node a labelled marker at its position's column, each attention edge carrying its cell and
    the clean run's weight there, every token escaped; the figure as sent is Plotly's."""
    from explorer.views.attribution_graph import graph_figure
    from tests.test_figures import assert_valid_as_sent

    pruned = dataclasses.replace(graph.pruned(), tokens=["<b>x</b>", *graph.tokens[1:]])
    fig = graph_figure(pruned)
    assert_valid_as_sent(fig)
    by_role = {trace["meta"]["role"]: trace for trace in fig.data if trace.get("meta")}
    nodes, attention = by_role["nodes"], by_role["attention"]
    labels = list(nodes["text"])
    assert all(labels) and "logits" in labels
    assert {pruned.label(w) for w in pruned.writers(("head",))} <= set(labels)
    assert all("<b>" not in text for text in labels + list(attention["text"]))
    for (layer, head, query, key), text in zip(attention["customdata"], attention["text"], strict=True):
        assert query >= key and f"weight {float(pruned.attention[layer, head, query, key]):.2f}" in text
    ticks = fig.layout["xaxis"]["ticktext"]
    assert ticks[0] == "&lt;b&gt;x&lt;/b&gt;" and len(ticks) == pruned.n_tokens

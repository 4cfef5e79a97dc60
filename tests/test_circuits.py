"""Circuits hold against Hugging Face transformers with hooks and torch autograd, on a Llama with GQA,
a Qwen3 (QK-norm) and a Gemma 3 (sliding layers, norms after attention and the MLP): each node kind
patched at one position or every one; attribution patching as gradient × difference; the exact circuit
metric with every edge kept (the clean run), none (the corrupted run) and one edge cut (a hooked
reference); EAP-IG with one step as gradient × difference on every edge. And datasets: averaged over
pairs, pairs of unequal length named, the built-in generators' corruptions of equal length. The Llama runs in
the fast tier; Qwen3 and Gemma 3 in the slow one."""

from __future__ import annotations

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
MIDDLE = 9  # a position after the first difference (6)


def ids_of(ex, text: str) -> list[int]:
    return ex.tokenizer.encode(text, add_special_tokens=False).ids


def token(ex, text: str) -> int:
    (only,) = ids_of(ex, text)
    return only


def reference_diff(hf_model, ex, ids, edit) -> float:
    with torch.no_grad(), hf.hooks(hf_model, edit):
        logits = hf_model(torch.tensor([ids])).logits[0]
    return float(hf.logit_diff(logits, token(ex, ANSWER), token(ex, DISTRACTOR)))


NODES = [
    ("z", 1, 3, MIDDLE),
    ("z", 2, 5, -1),
    ("q", 1, 6, -1),
    ("q", 2, 0, None),
    ("k", 1, 1, MIDDLE),
    ("k", 2, 0, None),
    ("v", 1, 0, MIDDLE),
    ("v", 2, 1, -1),
    ("resid", 1, MIDDLE),
    ("resid", 2, None),
    ("resid", 1, 3),  # before the first difference: the same in both runs
    ("mlp", 0, MIDDLE),
    ("mlp", 2, -1),
]


def patch_edit(hf_model, clean_seen, node):
    """A hook edit setting one node of the corrupted run to its clean value."""
    kind, layer, *head, pos = node
    point = "resid" if kind == "resid" else kind
    where = slice(None) if pos is None else pos

    def edit(at, at_layer, value):
        if at != point or at_layer != layer:
            return None
        value = value.clone()
        clean = clean_seen[point, layer]
        if head:
            part = hf.head_slice(hf_model, head[0])
            value[0, where, part] = clean[where, part]
        else:
            value[0, where] = clean[where]
        return value

    return edit


def test_patching_each_node_kind_matches_hooked_transformers(hf_pair):
    hf_model, ex = hf_pair
    clean_seen, _ = hf.record(hf_model, ids_of(ex, CLEAN))
    ours = ex.patch_nodes(*PAIR, nodes=NODES)
    corrupted_ids = ids_of(ex, CORRUPTED)
    plain = reference_diff(hf_model, ex, corrupted_ids, lambda *a: None)
    moved = 0
    for node, value in zip(NODES, ours.tolist(), strict=True):
        reference = reference_diff(hf_model, ex, corrupted_ids, patch_edit(hf_model, clean_seen, node))
        assert abs(value - reference) <= 1e-5, node
        moved += abs(reference - plain) > 1e-3
    assert moved >= len(NODES) // 2  # the patches change the metric: the test can fail


def test_attribution_patching_is_gradient_times_difference(hf_pair):
    hf_model, ex = hf_pair
    clean_seen, _ = hf.record(hf_model, ids_of(ex, CLEAN))
    corrupted_seen, _ = hf.record(hf_model, ids_of(ex, CORRUPTED))
    points = ("resid", "q", "k", "v", "z", "mlp")
    leaves = {key: torch.zeros_like(value, requires_grad=True) for key, value in corrupted_seen.items()}

    def edit(point, layer, value):
        return value + leaves[point, layer] if point in points and (point, layer) in leaves else None

    with hf.hooks(hf_model, edit):
        logits = hf_model(torch.tensor([ids_of(ex, CORRUPTED)])).logits[0]
    metric = hf.logit_diff(logits, token(ex, ANSWER), token(ex, DISTRACTOR))
    grads = dict(
        zip(leaves, torch.autograd.grad(metric, list(leaves.values()), allow_unused=True), strict=True)
    )
    ours = ex.attribution_patching(*PAIR, nodes=NODES)
    for node, value in zip(NODES, ours.tolist(), strict=True):
        kind, layer, *head, pos = node
        where = slice(None) if pos is None else pos
        difference = clean_seen[kind, layer] - corrupted_seen[kind, layer]
        grad = grads[kind, layer]
        if head:
            part = hf.head_slice(hf_model, head[0])
            difference, grad = difference[..., part], grad[..., part]
        assert abs(value - float((difference[where] * grad[where]).sum())) <= 1e-4, node


def test_atp_star_reads_q_and_k_through_the_exact_pattern(hf_pair):
    _, ex = hf_pair
    nodes = [("k", 1, 0, MIDDLE), ("q", 2, 3, -1), ("z", 1, 3, MIDDLE)]
    plain = ex.attribution_patching(*PAIR, nodes=nodes)
    fixed = ex.attribution_patching(*PAIR, nodes=nodes, qk_fix=True)
    assert fixed[2] == plain[2]  # a z node is estimated as AtP does
    exact = ex.patch_nodes(*PAIR, nodes=nodes[:2]) - ex.circuit_metric(*PAIR, edges=[])
    # AtP* is the exact pattern change linearised once: never farther from the exact effect than AtP
    # by more than rounding on these seeded models
    assert ((fixed[:2] - exact).abs() <= (plain[:2] - exact).abs() + 1e-3).all()


def test_circuit_of_every_edge_is_the_clean_run_and_of_none_the_corrupted(hf_pair):
    hf_model, ex = hf_pair
    _, clean_logits = hf.record(hf_model, ids_of(ex, CLEAN))
    _, corrupted_logits = hf.record(hf_model, ids_of(ex, CORRUPTED))
    answer, distractor = token(ex, ANSWER), token(ex, DISTRACTOR)
    config = ex.config
    up, down = edge_module.upstream_nodes(config), edge_module.downstream_nodes(config)
    every = [(up[u], down[v]) for u, v in edge_module.valid_edges(config).nonzero().tolist()]
    clean, corrupted = (float(hf.logit_diff(x, answer, distractor)) for x in (clean_logits, corrupted_logits))
    assert abs(ex.circuit_metric(*PAIR, edges=every) - clean) <= 1e-4
    assert abs(ex.circuit_metric(*PAIR, edges=[]) - corrupted) <= 1e-4
    assert abs(clean - corrupted) > 1e-2


CUT = [  # each reaches the last position, in Gemma's sliding layers (window 5) too
    (("head", 0, 2), ("k", 1, 1)),
    (("mlp", 0), ("v", 1, 1)),
    (("embedding",), ("k", 1, 0)),
    (("head", 1, 2), ("q", 2, 5)),
    (("head", 1, 4), ("mlp", 1)),
    (("mlp", 1), ("logits",)),
]


def test_cutting_one_edge_matches_a_hooked_reference(hf_pair):
    hf_model, ex = hf_pair
    config = ex.config
    up, down = edge_module.upstream_nodes(config), edge_module.downstream_nodes(config)
    every = [(up[u], down[v]) for u, v in edge_module.valid_edges(config).nonzero().tolist()]
    clean_seen, clean_logits = hf.record(hf_model, ids_of(ex, CLEAN))
    corrupted_seen, _ = hf.record(hf_model, ids_of(ex, CORRUPTED))
    deltas = hf.writes(hf_model, clean_seen) - hf.writes(hf_model, corrupted_seen)  # [U, N, hidden]
    clean = float(hf.logit_diff(clean_logits, token(ex, ANSWER), token(ex, DISTRACTOR)))
    for cut in CUT:
        delta = deltas[up.index(cut[0])]
        reference = reference_diff(hf_model, ex, ids_of(ex, CLEAN), hf.cut_edit(hf_model, cut[1], delta))
        ours = ex.circuit_metric(*PAIR, edges=[edge for edge in every if edge != cut])
        assert abs(ours - reference) <= 1e-4, cut
        assert abs(reference - clean) > 1e-5, cut  # the cut moves the metric: the test can fail


def test_eap_with_one_step_is_gradient_times_difference_on_every_edge(hf_pair):
    hf_model, ex = hf_pair
    clean, corrupted = ids_of(ex, CLEAN), ids_of(ex, CORRUPTED)
    reference = hf.eap_one_step(
        hf_model, ex.config, clean, corrupted, token(ex, ANSWER), token(ex, DISTRACTOR)
    ).sum(-1)  # [U, V]
    result = ex.edge_attribution([CLEAN], [CORRUPTED], [ANSWER], [DISTRACTOR], steps=1)
    reference = reference * result.valid
    assert (result.scores - reference).abs().max() <= 1e-4
    assert reference.abs().max() > 1e-2
    scores = [abs(score) for *_, score in result.edges]
    assert scores == sorted(scores, reverse=True) and len(scores) == int(result.valid.sum())


def test_more_steps_change_eap_and_keep_its_edges(hf_pair):
    _, ex = hf_pair
    one = ex.edge_attribution([CLEAN], [CORRUPTED], [ANSWER], [DISTRACTOR], steps=1)
    five = ex.edge_attribution([CLEAN], [CORRUPTED], [ANSWER], [DISTRACTOR], steps=5)
    assert torch.equal(one.valid, five.valid)
    assert (one.scores - five.scores).abs().max() > 1e-4


def test_a_dataset_is_averaged_over_its_pairs(gqa_checkpoint):
    ex = explorer.load(gqa_checkpoint, device="cpu")
    second = ("Now be, or not to be, that is the question: whether the", " be", " to")
    nodes = [("z", 1, 2, None), ("mlp", 0, -1), ("k", 3, 1, -2)]
    pairs = ([CLEAN, second[0]], [CORRUPTED, CORRUPTED], [ANSWER, second[1]], [DISTRACTOR, second[2]])
    singles = [
        ex.patch_nodes(CLEAN, CORRUPTED, ANSWER, DISTRACTOR, nodes=nodes),
        ex.patch_nodes(second[0], CORRUPTED, second[1], second[2], nodes=nodes),
    ]
    torch.testing.assert_close(ex.patch_nodes(*pairs, nodes=nodes), (singles[0] + singles[1]) / 2)
    both = ex.circuit_metric(*pairs, edges=[])
    alone = [
        ex.circuit_metric(CLEAN, CORRUPTED, ANSWER, DISTRACTOR),
        ex.circuit_metric(second[0], CORRUPTED, *second[1:]),
    ]
    assert abs(both - sum(alone) / 2) <= 1e-5


@pytest.mark.parametrize("metric", ["prob", "kl"])
def test_probability_and_kl_metrics_run_from_corrupted_to_clean(gqa_checkpoint, metric):
    ex = explorer.load(gqa_checkpoint, device="cpu")
    config = ex.config
    up, down = edge_module.upstream_nodes(config), edge_module.downstream_nodes(config)
    every = [(up[u], down[v]) for u, v in edge_module.valid_edges(config).nonzero().tolist()]
    clean = ex.circuit_metric(CLEAN, CORRUPTED, ANSWER, metric=metric, edges=every)
    corrupted = ex.circuit_metric(CLEAN, CORRUPTED, ANSWER, metric=metric, edges=[])
    run = ex.run(CLEAN)
    if metric == "prob":
        assert abs(clean - float(torch.softmax(run.logits[-1], -1)[token(ex, ANSWER)])) <= 1e-5
    else:
        assert abs(clean) <= 1e-5 and corrupted > 1e-4
    whole = ex.patch_nodes(CLEAN, CORRUPTED, ANSWER, metric=metric, nodes=[("resid", 0, None)])
    assert abs(float(whole[0]) - clean) <= 1e-5


def test_pairs_of_unequal_length_are_refused_by_number(gqa_checkpoint):
    ex = explorer.load(gqa_checkpoint, device="cpu")
    with pytest.raises(PromptError, match="In pair 2, the clean and corrupted prompts must have the same"):
        ex.edge_attribution([CLEAN, CLEAN], [CORRUPTED, "To be"], ANSWER, DISTRACTOR)
    with pytest.raises(ValueError, match="needs a distractor"):
        ex.circuit_metric(CLEAN, CORRUPTED, ANSWER)
    with pytest.raises(ValueError, match="not an edge"):
        ex.circuit_metric(*PAIR, edges=[(("head", 2, 0), ("q", 1, 0))])
    with pytest.raises(ValueError, match="out of range"):
        ex.patch_nodes(*PAIR, nodes=[("k", 0, 5, 0)])  # 2 kv heads


@pytest.mark.parametrize("name", sorted(prompt_sets.BUILT_IN))
def test_built_in_datasets_are_seeded_and_their_pairs_of_equal_length(name):
    first, again, other = (prompt_sets.built_in(name, 8, seed) for seed in (0, 0, 1))
    assert first == again and first != other and len(first) == 8
    for clean, corrupted, answer, distractor in zip(*first.args(), strict=True):
        assert clean != corrupted and answer != distractor
        assert len(clean.split()) == len(corrupted.split())

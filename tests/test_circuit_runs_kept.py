"""The exact circuit metric keeps each dataset's corrupted run on the Explorer (`engine.exact_circuits`):
a second circuit of the same pairs records no corrupted run, and another dataset of the same length,
whatever differs in it (the corrupted prompt, or for KL the clean one), never reads those writes."""

from __future__ import annotations

import explorer
from explorer.app.kept import model_nbytes
from explorer.engine import edges as edge_module
from tests.test_circuits import ANSWER, CLEAN, CORRUPTED, DISTRACTOR, PAIR

OTHER_CORRUPTED = "To be, or not no be, that is the question: whether the"  # as many tokens
OTHER_CLEAN = "To be, or not to be, this is the question: whether the"


def some_edges(ex, every: int = 3) -> list:
    up, down = edge_module.upstream_nodes(ex.config), edge_module.downstream_nodes(ex.config)
    valid = edge_module.valid_edges(ex.config).nonzero().tolist()
    return [(up[u], down[v]) for u, v in valid[::every]]


def uncached(checkpoint, *args, **kwargs) -> float:
    ex = explorer.load(checkpoint, device="cpu")
    ex.corrupted_runs.max_bytes = 0  # keeps nothing: every call records its corrupted run
    return ex.circuit_metric(*args, **kwargs)


def test_the_corrupted_run_is_kept_and_read_by_the_next_circuit_of_the_same_pairs(gqa_checkpoint):
    ex = explorer.load(gqa_checkpoint, device="cpu")
    kept = some_edges(ex)
    assert len(ex.tokenizer.encode(OTHER_CORRUPTED).ids) == len(ex.tokenizer.encode(CORRUPTED).ids)
    start = ex.forward_count
    first = ex.circuit_metric(*PAIR, edges=kept)
    assert ex.forward_count - start == 2 and len(ex.corrupted_runs) == 1  # recorded, then the circuit
    assert ex.corrupted_runs.nbytes > 0
    again = ex.circuit_metric(*PAIR, edges=kept)
    assert ex.forward_count - start == 3 and again == first  # the circuit alone, the same value
    assert first == uncached(gqa_checkpoint, *PAIR, edges=kept)


def test_another_dataset_of_the_same_length_never_reads_the_kept_writes(gqa_checkpoint):
    ex = explorer.load(gqa_checkpoint, device="cpu")
    kept = some_edges(ex)
    first = ex.circuit_metric(*PAIR, edges=kept)
    other = ex.circuit_metric(CLEAN, OTHER_CORRUPTED, ANSWER, DISTRACTOR, edges=kept)
    assert len(ex.corrupted_runs) == 2 and other != first
    assert other == uncached(gqa_checkpoint, CLEAN, OTHER_CORRUPTED, ANSWER, DISTRACTOR, edges=kept)
    # KL reads the clean run too: another clean prompt over the same corrupted one is its own entry
    kl = ex.circuit_metric(CLEAN, CORRUPTED, ANSWER, metric="kl", edges=kept)
    kl_other = ex.circuit_metric(OTHER_CLEAN, CORRUPTED, ANSWER, metric="kl", edges=kept)
    assert kl_other != kl
    assert kl_other == uncached(gqa_checkpoint, OTHER_CLEAN, CORRUPTED, ANSWER, metric="kl", edges=kept)


def test_the_kept_runs_stay_within_their_bytes(gqa_checkpoint):
    ex = explorer.load(gqa_checkpoint, device="cpu")
    ex.circuit_metric(*PAIR, edges=[])
    one = ex.corrupted_runs.nbytes
    ex.corrupted_runs.max_bytes = one + one // 2  # room for one run
    ex.circuit_metric(CLEAN, OTHER_CORRUPTED, ANSWER, DISTRACTOR, edges=[])
    assert len(ex.corrupted_runs) == 1 and ex.corrupted_runs.nbytes <= ex.corrupted_runs.max_bytes
    start = ex.forward_count
    ex.circuit_metric(CLEAN, OTHER_CORRUPTED, ANSWER, DISTRACTOR, edges=[])  # the latest is the one kept
    assert ex.forward_count - start == 1


def test_the_apps_budget_counts_the_kept_runs_with_the_model(gqa_checkpoint):
    ex = explorer.load(gqa_checkpoint, device="cpu")
    before = model_nbytes(ex)
    ex.circuit_metric(*PAIR, edges=[])
    assert model_nbytes(ex) == before + ex.corrupted_runs.nbytes > before

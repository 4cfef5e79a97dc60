"""Head-type reductions score hand-made attention patterns as they should."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import explorer
from explorer.engine import heads
from tests.conftest import PROMPT


def pattern(n: int, kind: str) -> torch.Tensor:
    """One head's [N, N] map that does exactly one thing."""
    probs = torch.zeros(n, n)
    for i in range(n):
        if kind == "previous":
            probs[i, max(i - 1, 0)] = 1
        elif kind == "sink":
            probs[i, 0] = 1
        elif kind == "uniform":
            probs[i, : i + 1] = 1 / (i + 1)
        elif kind == "self":
            probs[i, i] = 1
    return probs


def test_scores_recognise_the_pattern_they_name():
    n = 12
    probs = torch.stack([pattern(n, k) for k in ("previous", "sink", "uniform", "self")])
    uniform_previous = sum(1 / (i + 1) for i in range(1, n)) / (n - 1)
    expected_previous = torch.tensor([1.0, 1 / (n - 1), uniform_previous, 0.0])
    torch.testing.assert_close(heads.previous_token_score(probs), expected_previous)
    uniform_sink = sum(1 / (i + 1) for i in range(1, n)) / (n - 1)
    torch.testing.assert_close(heads.sink_score(probs), torch.tensor([1 / (n - 1), 1.0, uniform_sink, 0.0]))
    profile = heads.layer_profile(probs, torch.arange(n))
    ent = profile["entropy"]
    assert ent[0] == 0 and ent[3] == 0
    assert ent[2].item() == pytest.approx(sum(math.log(i + 1) for i in range(n)) / n, rel=1e-5)
    dist = profile["distance"]
    assert dist[3] == 0 and dist[0].item() == pytest.approx((n - 1) / n)
    torch.testing.assert_close(profile["previous_token"], expected_previous)


def test_induction_score_reads_the_token_after_the_earlier_occurrence():
    period, n = 5, 10
    probs = torch.zeros(1, n, n)
    for i in range(n):
        probs[0, i, i - period + 1 if i >= period else 0] = 1
    assert heads.induction_score(probs, period).item() == 1.0
    assert heads.induction_score(pattern(n, "previous")[None], period).item() == 0.0
    with pytest.raises(ValueError):
        heads.induction_score(probs, n)


def test_prompt_profile_sweeps_layers_without_filling_the_cache(gqa_checkpoint):
    ex = explorer.load(gqa_checkpoint, device="cpu")
    run = ex.run(PROMPT)
    profile = heads.prompt_profile(run)
    assert run.cached_eager_bytes == 0
    assert set(profile) == set(heads.PROFILE_SCORES)
    for scores in profile.values():
        assert scores.shape == (ex.config.n_layers, ex.config.n_heads) and torch.isfinite(scores).all()
    torch.testing.assert_close(profile["sink"][2], heads.sink_score(run.attention(2).probs))


def test_induction_on_the_prompt_scores_attention_to_what_followed_the_earlier_occurrence():
    ids = torch.tensor([5, 6, 7, 8, 5, 6, 7, 9])  # "5 6 7" comes back at 4..6
    n = len(ids)
    induction, previous = torch.zeros(n, n), pattern(n, "previous")
    for i in range(n):
        induction[i, i] = 1  # nothing seen before: attend to yourself
    for i, j in ((4, 1), (5, 2), (6, 3)):  # from the repeat to what followed its first occurrence
        induction[i] = 0
        induction[i, j] = 1
    targets = heads.induction_targets(ids)
    assert targets.nonzero().tolist() == [[4, 1], [5, 2], [6, 3]]
    scores = heads.layer_profile(torch.stack([induction, previous]), ids)["induction"]
    torch.testing.assert_close(scores, torch.tensor([1.0, 0.0]))
    assert heads.layer_profile(previous[None], torch.arange(n))["induction"].isnan().all()  # no repeats


def test_the_bundled_models_induction_heads_score_high_on_a_line_written_twice():
    ex = explorer.load(device="cpu")
    line = "the pale moon sings of iron bells and crooked wine."
    profile = heads.prompt_profile(ex.run(line + "\n" + line))
    assert set(profile) == set(heads.PROFILE_SCORES)
    induction = profile["induction"]  # [L, H]
    assert induction.shape == (ex.config.n_layers, ex.config.n_heads) and not induction.isnan().any()
    assert induction[3].max() > 0.3 and induction[0].max() < 0.2  # layer 3's induction heads, not layer 0


def test_a_layers_scores_are_the_same_from_its_whole_maps_or_a_block_of_queries_at_a_time(gqa_checkpoint):
    run = explorer.load(gqa_checkpoint, device="cpu").run(PROMPT)
    ids = torch.tensor(run.ids)
    by_blocks = heads.prompt_profile(run, block_bytes=8 * run.n_tokens * 4 * 5)  # blocks of 5 queries
    for layer in range(run.config.n_layers):
        whole = heads.layer_profile(run.attention(layer).probs, ids)
        for name in heads.PROFILE_SCORES:
            torch.testing.assert_close(by_blocks[name][layer], whole[name], atol=2e-6, rtol=1e-5)


def test_the_overview_lists_each_scores_top_heads_best_first():
    from explorer import views

    rng = np.random.default_rng(0)
    profile = {name: rng.random((4, 6)).astype(np.float32) for name in views.TOP_HEAD_LISTS}
    profile["induction"][:] = np.nan  # no token repeats on this prompt
    profile["sink"][2, 5] = np.nan  # a head with no score is never listed
    kv_head = np.array([0, 0, 0, 1, 1, 1])
    lists = views.top_heads(profile, kv_head, k=5)
    assert lists["induction"] == []
    for name, highest in (("previous_token", True), ("sink", True), ("entropy", False)):
        scores = profile[name]
        expected = sorted(
            ((float(scores[l, h]), l, h) for l in range(4) for h in range(6) if not np.isnan(scores[l, h])),
            reverse=highest,
        )[:5]
        got = [(t.score, t.layer, t.head) for t in lists[name]]
        assert got == [(pytest.approx(s), l, h) for s, l, h in expected], name
        assert all(t.kv_head == kv_head[t.head] for t in lists[name])

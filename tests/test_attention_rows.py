"""The one attention (`run.attention_rows`, `engine.rows`): rows of chosen queries are transformers' eager
maps, each stage follows from the one before, and the taps on the scores and the pattern read and edit
what a forward's attention computes."""

from __future__ import annotations

import math

import pytest
import torch

import explorer
from explorer.engine.attention import eager_attention
from explorer.engine.rows import attention_mask
from explorer.engine.taps import Taps
from tests.conftest import HF_CONFIGS, PROMPT, make_hf_checkpoint

QUERIES = [0, 5, 17, -3, -1]


@pytest.fixture(scope="module", params=["llama-untied", "qwen3-qk-norm", "gemma3-sliding"])
def hf_pair(request, tmp_path_factory, tiny_tokenizer):
    model_type, overrides = HF_CONFIGS[request.param]
    directory = tmp_path_factory.mktemp(request.param)
    hf_model = make_hf_checkpoint(directory, tiny_tokenizer, model_type, **overrides)
    return hf_model, explorer.load(directory, device="cpu")


def test_rows_of_chosen_queries_are_transformers_eager_maps(hf_pair):
    hf_model, ex = hf_pair
    run = ex.run(PROMPT)
    with torch.no_grad():
        hf_maps = hf_model(torch.tensor([run.ids]), output_attentions=True).attentions
    positions = [q % run.n_tokens for q in QUERIES]
    for layer, hf_probs in enumerate(hf_maps):
        rows = run.attention_rows(layer, QUERIES)
        assert rows.probs.shape == (ex.config.n_heads, len(QUERIES), run.n_tokens)
        assert rows.probs.dtype == torch.float32
        assert (rows.probs - hf_probs[0][:, positions]).abs().max().item() <= 1e-5
        one = run.attention_rows(layer, QUERIES, head=3)
        for name in ("scores", "scaled", "masked", "probs"):
            assert getattr(one, name).shape == (1, len(QUERIES), run.n_tokens)
            torch.testing.assert_close(getattr(one, name), getattr(rows, name)[3:4], atol=1e-5, rtol=1e-6)


def test_each_stage_follows_from_the_one_before(hf_pair):
    _, ex = hf_pair
    run = ex.run(PROMPT)
    for layer in range(ex.config.n_layers):
        rows = run.attention_rows(layer, range(3, run.n_tokens))
        window = ex.config.window(layer)
        allowed = attention_mask(torch.arange(3, run.n_tokens), run.n_tokens, window)
        assert torch.equal(rows.allowed, allowed)
        assert torch.equal(rows.scaled, rows.scores * ex.config.attention_scale)
        assert torch.equal(rows.masked[:, allowed], rows.scaled[:, allowed])
        assert torch.all(rows.masked[:, ~allowed] == -math.inf)
        assert torch.all(rows.probs[:, ~allowed] == 0) and torch.all(rows.probs[:, allowed] > 0)
        torch.testing.assert_close(rows.probs.sum(-1), torch.ones(rows.probs.shape[:2]))
        eager = run.attention(layer)  # the eager rerun's rows are the same rows
        assert torch.equal(rows.probs, eager.probs[:, 3:])
        assert torch.equal(rows.scores, eager.scores[:, 3:])


def test_a_forwards_pattern_and_scores_taps_read_the_eager_stages(hf_pair):
    _, ex = hf_pair
    run = ex.run(PROMPT)
    seen = {"scores": {}, "pattern": {}}

    def keep(point):
        return lambda layer, value: seen[point].__setitem__(layer, value.clone())

    taps = Taps(scores=keep("scores"), pattern=keep("pattern"))
    with torch.inference_mode():
        logits = ex.model.logits(ex.model.hidden_states(torch.tensor([run.ids]), taps=taps)[0])
    # attending stage by stage changes the stream by float32 rounding alone
    torch.testing.assert_close(logits, run.logits, atol=1e-4, rtol=0)
    for layer in range(ex.config.n_layers):
        eager = run.attention(layer)
        pattern, scores = seen["pattern"][layer], seen["scores"][layer]
        assert pattern.shape == scores.shape == (1, ex.config.n_heads, run.n_tokens, run.n_tokens)
        torch.testing.assert_close(pattern[0], eager.probs, atol=1e-5, rtol=0)
        assert torch.equal(scores[0].isinf(), eager.masked.isinf())
        torch.testing.assert_close(scores[0], eager.masked, atol=1e-4, rtol=1e-5)


def test_a_pattern_tap_that_zeroes_a_head_is_that_heads_zero_ablation(hf_pair):
    _, ex = hf_pair
    run = ex.run(PROMPT)
    ablated = ex.run(PROMPT, ablate=[(1, 2)])

    def zero_head(layer, pattern):  # [1, H, N, N]
        if layer == 1:
            pattern = pattern.clone()
            pattern[:, 2] = 0
            return pattern
        return None

    with torch.inference_mode():
        logits = ex.model.logits(
            ex.model.hidden_states(torch.tensor([run.ids]), taps=Taps(pattern=zero_head))[0]
        )
    torch.testing.assert_close(logits, ablated.logits, atol=1e-4, rtol=0)
    assert (logits - run.logits).abs().max() > 1e-2  # the edit matters


def test_the_eager_reruns_taps_see_the_layers_rows_as_a_forwards(hf_pair):
    _, ex = hf_pair
    run = ex.run(PROMPT)
    seen = []

    def halve_head_0(layer, pattern):
        seen.append(pattern.shape)
        pattern = pattern.clone()
        pattern[:, 0] /= 2
        return pattern

    block, x = ex.model.layers[0], run.layer_inputs[0]
    edited = eager_attention(block, x, ex.model.layer_inv_freq(0), 0, Taps(pattern=halve_head_0))
    assert seen == [(1, ex.config.n_heads, run.n_tokens, run.n_tokens)]
    torch.testing.assert_close(edited.probs[0], run.attention(0).probs[0] / 2)
    torch.testing.assert_close(edited.probs[1:], run.attention(0).probs[1:])


def test_attention_rows_refuse_what_is_not_there(hf_pair):
    _, ex = hf_pair
    run = ex.run(PROMPT)
    with pytest.raises(ValueError, match="layer"):
        run.attention_rows(ex.config.n_layers, [0])
    with pytest.raises(ValueError, match="query"):
        run.attention_rows(0, [run.n_tokens])
    with pytest.raises(ValueError, match="head"):
        run.attention_rows(0, [0], head=ex.config.n_heads)
    assert run.attention_rows(0, 4).probs.shape == (ex.config.n_heads, 1, run.n_tokens)

"""Generation from a KV cache, checked against Hugging Face transformers: greedy ids, every step's attention
row, seeded sampling, stopping, the cache's size, the finished Run; then its views and figures."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from transformers import LogitsProcessorList, TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

import explorer
from explorer import views
from explorer.engine.generate import sampling_probs
from explorer.engine.tokens import display_tokens
from explorer.figures.codec import MAP_BUDGET_BYTES
from explorer.figures.common import token_label
from explorer.figures.generation import CHOSEN_COLOUR, encode_rows
from explorer.views import generation as generation_views
from tests.conftest import HF_CONFIGS, PROMPT, make_hf_checkpoint
from tests.test_figures import assert_valid_as_sent, decoded, snapshot_view, traces
from tests.tolerant_snapshots import TolerantAmberExtension

NEW_TOKENS = 24
SAMPLING = dict(temperature=0.8, top_k=40, top_p=0.9)


@pytest.fixture(scope="module", params=["llama-untied", "qwen2-bias", "gemma3-sliding"])
def pair(request, tmp_path_factory, tiny_tokenizer):
    """A transformers model (eager attention) and our Explorer on the same seeded weights."""
    model_type, overrides = HF_CONFIGS[request.param]
    directory = tmp_path_factory.mktemp(f"gen-{request.param}")
    hf_model = make_hf_checkpoint(directory, tiny_tokenizer, model_type, **overrides)
    hf_model.generation_config.eos_token_id = None  # random weights: let neither side stop early
    return hf_model, explorer.load(directory, device="cpu")


def hf_generate(hf_model, prompt_ids: list[int], **kwargs) -> list[int]:
    with torch.no_grad():
        out = hf_model.generate(torch.tensor([prompt_ids]), pad_token_id=0, **kwargs)
    return out[0].tolist()


@pytest.fixture(scope="module")
def greedy(pair):
    _, ex = pair
    generation = ex.generate(PROMPT, max_new_tokens=NEW_TOKENS, stop_at_eos=False)
    steps = list(generation)
    return generation, steps


def test_greedy_ids_equal_transformers_generate(pair, greedy):
    hf_model, _ = pair
    generation, steps = greedy
    assert len(steps) == NEW_TOKENS and generation.stop_reason == "max_new_tokens"
    expected = hf_generate(hf_model, generation.prompt_ids, do_sample=False, max_new_tokens=NEW_TOKENS)
    assert generation.ids == expected
    assert len(set(expected[len(generation.prompt_ids) :])) > 1  # not one token repeated


def test_every_steps_attention_equals_transformers_eager_row_every_layer(pair, greedy):
    hf_model, ex = pair
    generation, steps = greedy
    with torch.no_grad():
        hf_maps = hf_model(torch.tensor([generation.ids]), output_attentions=True).attentions
    n_prompt = len(generation.prompt_ids)
    for k, step in enumerate(steps):
        q = n_prompt - 1 + k
        assert (step.index, step.position) == (k, q)
        assert step.attention.dtype == torch.float32 and step.attention.device.type == "cpu"
        assert step.attention.shape == (ex.config.n_layers, ex.config.n_heads, q + 1)
        expected = torch.stack([layer_maps[0, :, q, : q + 1] for layer_maps in hf_maps])  # [L, H, q+1]
        assert (step.attention - expected).abs().max().item() <= 1e-5
        torch.testing.assert_close(step.attention.sum(-1), torch.ones(step.attention.shape[:2]))
    # The rows carry position: far from uniform, so a wrong RoPE offset in the cache cannot hide.
    last = steps[-1].attention
    assert (last - 1 / last.shape[-1]).abs().max().item() > 0.1


def test_prefill_runs_once_then_each_step_feeds_one_token(pair):
    _, ex = pair
    fed = []
    hook = ex.model.embed_tokens.register_forward_hook(lambda module, args, out: fed.append(args[0].shape))
    try:
        generation = ex.generate(PROMPT, max_new_tokens=5, stop_at_eos=False)
        list(generation)
    finally:
        hook.remove()
    n_prompt = len(generation.prompt_ids)
    assert fed == [(1, n_prompt)] + [(1, 1)] * 4  # the 5th token is not fed: nothing comes after it


def test_seeded_sampling_is_reproducible_and_depends_on_the_seed(pair):
    _, ex = pair

    def sample(seed):
        steps = list(ex.generate(PROMPT, max_new_tokens=16, seed=seed, stop_at_eos=False, **SAMPLING))
        return [s.id for s in steps], torch.cat([s.attention.flatten() for s in steps])

    global_rng = torch.get_rng_state()
    first, again, other = sample(1), sample(1), sample(2)
    assert torch.equal(torch.get_rng_state(), global_rng)  # its own generator, never the global RNG
    assert first[0] == again[0] and torch.equal(first[1], again[1])
    assert first[0] != other[0]


def test_seeded_sampling_equals_transformers_sampling_from_the_same_seed(pair):
    """transformers draws with the global RNG; seeded alike, both draw the same tokens, which holds
    the order of the warpers and the draw itself."""
    hf_model, ex = pair
    generation = ex.generate(PROMPT, max_new_tokens=16, seed=7, stop_at_eos=False, **SAMPLING)
    list(generation)
    torch.manual_seed(7)
    expected = hf_generate(hf_model, generation.prompt_ids, do_sample=True, max_new_tokens=16, **SAMPLING)
    assert generation.ids == expected


@pytest.mark.parametrize(
    ("temperature", "top_k", "top_p"),
    [(1.0, None, None), (0.5, 5, None), (1.3, None, 0.8), (0.7, 20, 0.5), (1.0, 1, 0.3), (2.0, 999, 1.0)],
)
def test_sampling_probs_match_transformers_warpers(temperature, top_k, top_p):
    logits = torch.randn(300, generator=torch.Generator().manual_seed(0)) * 2
    logits[10:12] = logits.topk(5).values[-1]  # ties with the 5th: top-k keeps them all, as transformers
    warpers = LogitsProcessorList([TemperatureLogitsWarper(temperature)])
    if top_k is not None:
        warpers.append(TopKLogitsWarper(top_k))
    if top_p is not None and top_p < 1:
        warpers.append(TopPLogitsWarper(top_p))
    expected = warpers(None, logits[None].clone())[0].softmax(-1)
    probs = sampling_probs(logits, temperature, top_k, top_p)
    torch.testing.assert_close(probs, expected, atol=1e-7, rtol=0)
    assert ((probs > 0) == (expected > 0)).all()


def first_new_token(ids: list[int]) -> tuple[int, int]:
    """The first step (past step 0) whose token did not appear among the new tokens before it."""
    for k in range(1, len(ids)):
        if ids[k] not in ids[:k]:
            return k, ids[k]
    raise AssertionError("every new token repeats the first")


def test_stops_at_eos_as_transformers_does(pair, greedy):
    hf_model, ex = pair
    generation, _ = greedy
    n_prompt = len(generation.prompt_ids)
    k, eos = first_new_token(generation.ids[n_prompt:])
    stopped = ex.generate(PROMPT, max_new_tokens=NEW_TOKENS, eos_token_id=eos)
    steps = list(stopped)
    assert len(steps) == k + 1 and steps[-1].id == eos and stopped.stop_reason == "eos"
    expected = hf_generate(
        hf_model, stopped.prompt_ids, do_sample=False, max_new_tokens=NEW_TOKENS, eos_token_id=eos
    )
    assert stopped.ids == expected
    unstopped = ex.generate(PROMPT, max_new_tokens=NEW_TOKENS, eos_token_id=eos, stop_at_eos=False)
    assert len(list(unstopped)) == NEW_TOKENS


def test_eos_defaults_to_the_configs(pair, greedy):
    _, ex = pair
    generation, _ = greedy
    n_prompt = len(generation.prompt_ids)
    k, eos = first_new_token(generation.ids[n_prompt:])
    configured = explorer.load(ex.path, device="cpu")
    configured.config = dataclasses.replace(configured.config, eos_token_id=eos)
    stopped = configured.generate(PROMPT, max_new_tokens=NEW_TOKENS)
    assert len(list(stopped)) == k + 1 and stopped.stop_reason == "eos"


@pytest.fixture(scope="module")
def short_context(tmp_path_factory, tiny_tokenizer):
    """A llama whose context holds the prompt and 6 tokens more."""
    n_prompt = len(tiny_tokenizer.encode(PROMPT).ids)
    directory = tmp_path_factory.mktemp("gen-short-context")
    make_hf_checkpoint(directory, tiny_tokenizer, "llama", max_position_embeddings=n_prompt + 6)
    return explorer.load(directory, device="cpu")


def test_stops_at_the_context_length(short_context):
    ex = short_context
    generation = ex.generate(PROMPT, max_new_tokens=50, stop_at_eos=False)
    steps = list(generation)
    context = ex.config.context_length
    assert len(steps) == 6 and generation.stop_reason == "context"
    assert len(generation.ids) == context == generation.cache.capacity
    run = generation.run  # the last token fits: position context − 1
    assert run.n_tokens == context and run.logits.shape == (context, ex.config.vocab_size)


def test_a_prompt_that_fills_the_context_is_refused(short_context):
    with pytest.raises(explorer.PromptError, match=r"context holds \d+: shorten it"):
        short_context.generate(PROMPT + PROMPT)


def test_the_cache_holds_only_the_kv_heads(pair, greedy):
    _, ex = pair
    generation, _ = greedy
    c, cache = ex.config, generation.cache
    assert (c.n_heads, c.n_kv_heads) == (8, 2)
    capacity = len(generation.prompt_ids) + NEW_TOKENS
    assert cache.k.shape == cache.v.shape == (c.n_layers, c.n_kv_heads, capacity, c.head_dim)
    assert cache.nbytes() == 2 * c.n_layers * c.n_kv_heads * capacity * c.head_dim * 4
    assert cache.used_nbytes() == views.kv_cache_bytes_per_token(c, c.n_kv_heads, 4) * cache.length
    assert (
        cache.used_nbytes() * c.n_heads // c.n_kv_heads
        == views.kv_cache_bytes_per_token(c, c.n_heads, 4) * cache.length
    )


def test_the_finished_run_equals_a_fresh_forward_and_transformers(pair, greedy):
    hf_model, ex = pair
    generation, steps = greedy
    run = generation.run
    assert run.ids == generation.ids and run.n_tokens == len(generation.prompt_ids) + NEW_TOKENS
    assert run.tokens == display_tokens(ex.tokenizer, generation.ids)
    ids = torch.tensor([generation.ids])
    with torch.no_grad():
        fresh, hf_logits = ex.model(ids)[0], hf_model(ids).logits[0]
    assert (run.logits - fresh).abs().max().item() <= 1e-5
    assert (run.logits - hf_logits).abs().max().item() <= 1e-4
    for layer in range(ex.config.n_layers):  # the eager rerun from the kept inputs: the steps' rows
        probs = run.attention(layer).probs
        for step in steps[::5]:
            row = probs[:, step.position, : step.position + 1]
            assert (row - step.attention[layer]).abs().max().item() <= 1e-5


def test_breaking_out_early_leaves_the_sequence_so_far_as_a_run(pair):
    _, ex = pair
    generation = ex.generate(PROMPT, max_new_tokens=NEW_TOKENS, stop_at_eos=False)
    for step in generation:
        if step.index == 2:
            break
    assert generation.stop_reason is None and len(generation.steps) == 3
    run = generation.run
    assert run.n_tokens == len(generation.prompt_ids) + 3
    with torch.no_grad():
        fresh = ex.model(torch.tensor([run.ids]))[0]
    assert (run.logits - fresh).abs().max().item() <= 1e-5


def test_a_generation_runs_once(pair):
    _, ex = pair
    generation = ex.generate(PROMPT, max_new_tokens=2)
    list(generation)
    with pytest.raises(RuntimeError, match="runs once"):
        iter(generation)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        (dict(prompt="   "), explorer.PromptError, "prompt is empty"),
        (dict(max_new_tokens=0), ValueError, "max_new_tokens must be a whole number ≥ 1"),
        (dict(max_new_tokens=2.5), ValueError, "max_new_tokens must be a whole number ≥ 1"),
        (dict(temperature=-0.1), ValueError, r"temperature must be a number ≥ 0 \(0: greedy\)"),
        (dict(temperature=float("nan")), ValueError, "temperature must be a number ≥ 0"),
        (dict(top_k=0), ValueError, "top_k must be a whole number ≥ 1"),
        (dict(top_p=0.0), ValueError, r"top_p must be in \(0, 1\]"),
        (dict(top_p=1.5), ValueError, r"top_p must be in \(0, 1\]"),
        (dict(seed="a"), ValueError, "seed must be a whole number"),
    ],
)
def test_bad_arguments_get_clear_messages(pair, kwargs, error, message):
    _, ex = pair
    arguments = {"prompt": PROMPT, **kwargs}
    with pytest.raises(error, match=message):
        ex.generate(**arguments)


# Views and figures, on the bundled model, greedy.


@pytest.fixture
def snapshot(snapshot):
    return snapshot.use_extension(TolerantAmberExtension)


FIGURE_PROMPT = "To be, or not to be: <that> is the question."


@pytest.fixture(scope="module")
def bundled():
    generation = explorer.load(device="cpu").generate(FIGURE_PROMPT, max_new_tokens=8, stop_at_eos=False)
    list(generation)
    return generation


@pytest.fixture(scope="module")
def where(bundled):
    config = bundled.config
    return dict(layer=min(1, config.n_layers - 1), head=config.n_heads - 1)


@pytest.fixture(scope="module")
def generation_figures(bundled, where):
    layer, head = where["layer"], where["head"]
    return {
        "generation_map": generation_views.generation_map(bundled, layer, head),
        "generation_map_3_steps": generation_views.generation_map(bundled, layer, head, n_steps=3),
        "step_candidates": generation_views.step_candidates(bundled.steps[2]),
        "generation_kv_cache": generation_views.generation_kv_cache(bundled),
    }


@pytest.mark.parametrize(
    "name", ["generation_map", "generation_map_3_steps", "step_candidates", "generation_kv_cache"]
)
def test_generation_figure_matches_its_snapshot(generation_figures, name, snapshot):
    sent = decoded(generation_figures[name])
    sent["layout"].pop("template")
    assert snapshot_view(sent) == snapshot


@pytest.mark.parametrize("name", ["generation_map", "step_candidates", "generation_kv_cache"])
def test_generation_figure_is_sent_as_plotly_validates_it(generation_figures, name):
    assert_valid_as_sent(generation_figures[name])


@pytest.mark.parametrize("name", ["generation_map", "step_candidates", "generation_kv_cache"])
def test_generation_arrays_are_sent_typed(generation_figures, name):
    for trace in decoded(generation_figures[name])["data"]:
        for field in ("z", "x", "y"):
            value = trace.get(field)
            assert not isinstance(value, list) or not any(isinstance(v, (int, float)) for v in value), field


@pytest.mark.parametrize("n_steps", [None, 3])
def test_map_rows_are_the_steps_rows_at_their_query_positions(bundled, where, generation_figures, n_steps):
    name = "generation_map" if n_steps is None else "generation_map_3_steps"
    heatmap = traces(generation_figures[name])[0]
    shown = bundled.steps[:n_steps]
    z = heatmap["z"]
    assert z.shape == (len(shown), len(bundled.ids))
    assert heatmap["y0"] == len(bundled.prompt_ids) - 1 == shown[0].position
    for k, step in enumerate(shown):
        np.testing.assert_allclose(z[k, : step.position + 1], step.attention[where["layer"], where["head"]])
        assert np.isnan(z[k, step.position + 1 :]).all()  # keys after the query: blank


def test_map_axes_are_the_sequence_labelled_with_escaped_tokens(bundled, generation_figures):
    template = decoded(generation_figures["generation_map"])["layout"]["template"]["layout"]
    expected = {str(i): token_label(t) for i, t in enumerate(bundled.tokens)}
    assert template["xaxis"]["labelalias"] == template["yaxis"]["labelalias"] == expected
    assert "&lt;" in "".join(expected.values()) and "<that" not in "".join(expected.values())


def test_candidates_are_the_steps_with_the_chosen_token_marked(bundled, generation_figures):
    step = bundled.steps[2]
    bars = traces(generation_figures["step_candidates"])[0]
    np.testing.assert_allclose(bars["x"], [c.probability for c in step.candidates], rtol=1e-6)
    chosen = [c.id for c in step.candidates].index(step.id)  # greedy: the most likely
    assert chosen == 0 and [i for i, c in enumerate(bars["marker"]["color"]) if c == CHOSEN_COLOUR] == [0]


def test_a_sampled_token_outside_the_candidates_is_added_and_marked():
    generation = explorer.load(device="cpu").generate(
        FIGURE_PROMPT, max_new_tokens=40, temperature=5.0, seed=0
    )
    outside = next(s for s in generation if s.id not in [c.id for c in s.candidates])
    bars = traces(generation_views.step_candidates(outside))[0]
    assert len(bars["x"]) == len(outside.candidates) + 1
    assert (
        bars["x"][-1] == pytest.approx(outside.probability) and bars["marker"]["color"][-1] == CHOSEN_COLOUR
    )


def test_kv_cache_now_is_the_caches_measured_bytes_beside_mha_and_mqa(bundled, generation_figures):
    c, cache = bundled.config, bundled.cache
    this_model, mha, mqa = traces(generation_figures["generation_kv_cache"])
    assert this_model["x"][0] == f"now: {cache.length}"
    per_token = 2 * c.n_layers * c.head_dim * 4
    assert this_model["y"][0] == cache.used_nbytes() == per_token * c.n_kv_heads * cache.length
    assert mha["y"][0] == per_token * c.n_heads * cache.length and mqa["y"][0] == per_token * cache.length
    assert len(this_model["x"]) == len(views.kv_cache_contexts(c)) + 1


def test_rows_past_the_budget_go_in_8_bits():
    rows = np.full((64, 2048), np.nan, dtype=np.float32)
    rows[:, :10] = 0.1
    assert rows.size * 4 > MAP_BUDGET_BYTES
    encoded = encode_rows(rows)
    assert encoded.z.dtype == np.uint8 and not encoded.exact and encoded.note
    assert (encoded.z[:, :10] == 10).all() and (encoded.z[:, 10:] == 0).all()


@pytest.mark.parametrize(
    ("layer", "head", "message"),
    [(99, 0, r"layer must be an integer in \[0, 3\]"), (0, -1, r"head must be an integer in \[0, 7\]")],
)
def test_views_refuse_a_layer_or_head_out_of_range(bundled, layer, head, message):
    with pytest.raises(ValueError, match=message):
        generation_views.generation_map(bundled, layer, head)


def test_views_say_when_nothing_is_generated_yet():
    generation = explorer.load(device="cpu").generate(FIGURE_PROMPT, max_new_tokens=2)
    with pytest.raises(ValueError, match="Nothing has been generated yet"):
        generation_views.generation_map(generation, 0, 0)

"""The causal test of a score's split (`run.source_effect`): one source's write taken out of the key's or
the query's stream in transformers' eager model with hooks (the projection's output replaced at that
position by the projection of the edited stream, which transformers then norms and turns itself) gives
the same attention weight; the prediction is the split's own column (or row) of the table. Held on the
QK tests' four families: o_proj and q/k biases, QK-norm, Gemma's sliding layers and norms."""

from __future__ import annotations

import pytest
import torch

from explorer.engine.qk import sources
from tests.test_qk import hf_pair  # noqa: F401  (the fixture: a hooked reference and our run)

CASES = [  # (layer from the end, head, source, side, mode)
    (1, 5, ("head", 0, 2), "key", "zero"),
    (1, 0, ("mlp", 0), "query", "zero"),
    (2, 3, ("embedding",), "key", "mean"),
    (1, 6, ("head", 1, 4), "query", "mean"),
]


def position_pair(run) -> tuple[int, int]:
    return run.n_tokens - 1, run.n_tokens - 3  # a query and a key three back: in a sliding window too


def hooked_weight(reference, layer: int, head: int, query: int, key: int, side: str, stream) -> float:
    """The attention weight of `head` in transformers with `side`'s projection at its position
    recomputed from `stream` [hidden] (and through the model's own QK-norm and RoPE after it)."""
    model, config = reference.model, reference.config
    block = model.model.layers[layer]
    proj = getattr(block.self_attn, "k_proj" if side == "key" else "q_proj")
    d = config.head_dim
    index = head // (config.num_attention_heads // config.num_key_value_heads) if side == "key" else head
    rows, position = slice(index * d, (index + 1) * d), key if side == "key" else query
    with torch.no_grad():
        replaced = proj(block.input_layernorm(stream))[rows]

    def edit(module, args, output):
        output = output.clone()
        output[0, position, rows] = replaced
        return output

    handle = proj.register_forward_hook(edit)
    try:
        with torch.no_grad():
            out = model(torch.tensor([reference.ids]), output_attentions=True)
    finally:
        handle.remove()
    return float(out.attentions[layer][0, head, query, key])


@pytest.mark.parametrize("case", CASES, ids=lambda case: f"{case[2][0]}-{case[3]}-{case[4]}")
def test_a_removed_source_changes_the_weight_as_in_hooked_transformers(hf_pair, case):  # noqa: F811
    reference, run = hf_pair
    back, head, source, side, mode = case
    layer = run.config.n_layers - back
    query, key = position_pair(run)
    effect = run.source_effect(layer, head, query, key, source, side=side, mode=mode)
    position = key if side == "key" else query
    index = sources(run.config, layer).index(effect.source)
    with torch.no_grad():
        write = reference.sources_at(layer, position)[index]
        if mode == "mean":
            write = write - torch.stack(
                [reference.sources_at(layer, p)[index] for p in range(run.n_tokens)]
            ).mean(0)
        stream = reference.seen["stream"][layer][position] - write
    expected = hooked_weight(reference, layer, head, query, key, side, stream)
    assert effect.changed_weight == pytest.approx(expected, abs=1e-5)
    assert effect.weight == pytest.approx(float(run.attention(layer).probs[head, query, key]), abs=1e-6)
    assert (
        abs(effect.changed_weight - effect.weight) > 1e-6
    )  # the removal moves the weight: the test can fail


@pytest.mark.parametrize("side", ["key", "query"])
def test_the_prediction_is_the_splits_own_part_of_the_score(hf_pair, side):  # noqa: F811
    _, run = hf_pair
    layer, head = run.config.n_layers - 1, 2
    query, key = position_pair(run)
    split = run.score_attribution(layer, head, query, key)
    for index, source in enumerate(split.key_sources):
        effect = run.source_effect(layer, head, query, key, source, side=side)
        part = split.table[:, index].sum() if side == "key" else split.table[index].sum()
        assert effect.predicted_score == pytest.approx(
            split.score - float(part), abs=1e-4 * max(1, abs(split.score))
        )
        assert effect.score == pytest.approx(split.score, abs=1e-5)
        if side == "key":  # one score of the row moves: its weight follows the softmax of that row
            row = run.attention(layer).masked[head, query].clone()
            row[key] = effect.predicted_score
            assert effect.predicted_weight == pytest.approx(float(torch.softmax(row, -1)[key]), abs=1e-6)


def test_a_source_that_did_not_write_the_stream_is_refused_naming_what_did(hf_pair):  # noqa: F811
    _, run = hf_pair
    with pytest.raises(ValueError, match="did not write the stream layer 1 reads: its sources are"):
        run.source_effect(1, 0, 5, 2, ("head", 1, 0))
    with pytest.raises(ValueError, match="only the embedding did"):
        run.source_effect(0, 0, 5, 2, ("mlp", 0))
    with pytest.raises(ValueError, match="side is 'key' or 'query'"):
        run.source_effect(1, 0, 5, 2, ("embedding",), side="value")
    with pytest.raises(ValueError, match="mode is 'zero' or 'mean'"):
        run.source_effect(1, 0, 5, 2, ("embedding",), mode="resample")
    with pytest.raises(ValueError, match="does not see key 9"):
        run.source_effect(1, 0, 5, 9, ("embedding",))


def test_dropping_the_key_bias_matches_hooked_transformers(hf_pair):  # noqa: F811
    reference, run = hf_pair
    if not run.config.qkv_bias:
        pytest.skip("this family has no q/k bias")
    layer, head = run.config.n_layers - 1, 4
    query, key = position_pair(run)
    effect = run.source_effect(layer, head, query, key, ("bias",))
    block = reference.model.model.layers[layer]
    config, k_proj = reference.config, block.self_attn.k_proj
    kv, d = head // (config.num_attention_heads // config.num_key_value_heads), config.head_dim
    rows = slice(kv * d, (kv + 1) * d)
    with torch.no_grad():
        unbiased = (
            k_proj(block.input_layernorm(reference.seen["stream"][layer][key]))[rows] - k_proj.bias[rows]
        )

    def edit(module, args, output):
        output = output.clone()
        output[0, key, rows] = unbiased
        return output

    handle = k_proj.register_forward_hook(edit)
    try:
        with torch.no_grad():
            out = reference.model(torch.tensor([reference.ids]), output_attentions=True)
    finally:
        handle.remove()
    assert effect.changed_weight == pytest.approx(float(out.attentions[layer][0, head, query, key]), abs=1e-5)
    assert abs(effect.changed_weight - effect.weight) > 1e-6
    unmoved = run.source_effect(layer, head, query, key, ("bias",), mode="mean")  # its mean is itself
    assert (
        unmoved.changed_score == pytest.approx(effect.score, abs=1e-5)
        and unmoved.predicted_score == effect.score
    )


def test_the_why_panels_test_names_the_splits_largest_sources_and_reports_their_effect():
    """`views.testable_sources` lists the split's largest sources on each side (its values parse back to
    them), and `views.source_test` says the real change of the score and weight beside the prediction."""
    import explorer
    from explorer import views

    run = explorer.load().run("To be, or not to be, that is the question: whether the")
    layer, head, query, key = 2, 7, 6, 5
    choices = views.testable_sources(run.score_attribution(layer, head, query, key))
    a = run.score_attribution(layer, head, query, key)
    key_parts = a.table.sum(0)
    top = a.key_sources[int(key_parts.abs().argmax())]
    assert choices[0][1] == " ".join(str(part) for part in ("key", *top) if part is not None)
    assert {value.split()[0] for _, value in choices} == {"key", "query"}
    source = (top[0], *(part for part in top[1:] if part is not None))
    e = run.source_effect(layer, head, query, key, source, "key", "mean")
    line = views.source_test(run, layer, head, query, key, choices[0][1], "mean")
    predicted = f"(the split predicted {e.predicted_score:.3g})"
    assert f"score {e.score:.3g} → {e.changed_score:.3g} {predicted}" in line
    assert f"weight {e.weight:.3g} → {e.changed_weight:.3g}" in line and "mean over the prompt" in line
    for junk in ("", "sideways head 0 1", "key head x y"):
        with pytest.raises(ValueError):
            views.source_test(run, layer, head, query, key, junk, "zero")

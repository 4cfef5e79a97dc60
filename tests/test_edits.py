"""Edits on the one forward's taps against Hugging Face transformers with hooks (a Llama with GQA in the
fast tier; Qwen3 and Gemma 3 in the slow one): each op on each tap, attention knockout and a score edit
against a custom attention function with that cell changed, every view of an edited run showing the
edited model, generation under an edit against transformers' `generate` with the same hook, the steering
vector from hidden states; and every bad edit refused with a message before anything runs."""

from __future__ import annotations

import sys

import pytest
import torch

from explorer import Edit
from tests import hf_circuits as hf

TEXT = "To be, or not to be, that is the question: whether the"
POINTS = {"z": "z", "q": "q", "k": "k", "v": "v", "mlp": "mlp"}  # our tap -> the hook's point


def ids_of(ex, text: str = TEXT) -> list[int]:
    return ex.tokenizer.encode(text, add_special_tokens=False).ids


def region_of(tensor: torch.Tensor, edit: Edit, d: int) -> tuple:
    """The index of an edit's region in a hooked tensor [1, N, heads·d or hidden]."""
    positions = slice(None) if edit.position is None else edit.position
    if isinstance(positions, list):
        positions = torch.tensor(positions)
    if edit.head is None:
        return (0, positions)
    return (0, positions, slice(edit.head * d, (edit.head + 1) * d))


def edit_hook(edits: list[Edit], n_layers: int, d: int):
    """A hook function writing each edit where transformers' hook reads the same tensor."""

    def edit_at(point, layer, value):
        done = None
        for edit in edits:
            want = ("final", n_layers) if edit.tap == "resid" and edit.layer == n_layers else None
            want = want or ("resid" if edit.tap == "resid" else POINTS.get(edit.tap), edit.layer)
            if (point, layer) != want:
                continue
            value = (done if done is not None else value).clone()
            index = region_of(value, edit, d)
            region = value[index]
            if edit.value is not None and not callable(edit.value):
                given = torch.as_tensor(edit.value, dtype=value.dtype)
                if edit.head is None and edit.tap in ("q", "k", "v", "z") and given.dim() >= 2:
                    given = given.transpose(0, 1).flatten(-2) if given.dim() == 3 else given.flatten()
            if edit.op == "set":
                value[index] = torch.zeros_like(region) + given
            elif edit.op == "add":
                value[index] = region + given
            elif edit.op == "scale":
                value[index] = region * given
            else:
                value[index] = edit.value(region[None])[0]
            done = value
        return done

    return edit_at


def hooked_logits(hf_model, ids: list[int], edits: list[Edit], n_layers: int, d: int) -> torch.Tensor:
    """transformers' logits with each edit written where its hook reads the same tensor."""
    with torch.no_grad(), hf.hooks(hf_model, edit_hook(edits, n_layers, d)):
        return hf_model(torch.tensor([ids])).logits[0]


def our_logits(ex, edits: list[Edit]) -> torch.Tensor:
    return ex.run(ids=ids_of(ex), edits=edits).logits


def cases(config) -> list[list[Edit]]:
    L, d, hidden = config.n_layers, config.head_dim, config.hidden_size
    g = torch.Generator().manual_seed(0)

    def vector(*shape):
        return torch.randn(*shape, generator=g)

    return [
        [Edit("resid", 1, position=3, op="add", value=vector(hidden))],
        [Edit("resid", L, op="add", value=vector(hidden))],  # the final norm's input, every position
        [Edit("resid", 0, position=[2, 5], op="set", value=vector(2, hidden))],
        [Edit("z", 2, head=3, position=-1, op="set", value=vector(d))],
        [Edit("z", 1, head=0, op="scale", value=0.0)],
        [Edit("q", 0, head=5, position=slice(4, 9), op="add", value=vector(d))],
        [Edit("k", 1, head=1, position=[1, 6], op="add", value=vector(2, d))],  # (QK-norm: scale-free)
        [Edit("v", 1, head=1, position=[1, 6], op="scale", value=2.0)],
        [Edit("v", 2, head=0, position=4, op="fn", value=lambda region: region.flip(-1))],
        [Edit("mlp", 1, position=7, op="set", value=vector(hidden))],
        [Edit("mlp", 0, op="fn", value=lambda region: region * torch.tanh(region))],
        [  # two edits of one tap in the order given, and two taps at once
            Edit("z", 0, head=2, op="add", value=vector(d)),
            Edit("z", 0, head=2, position=-1, op="scale", value=-1.0),
            Edit("k", 2, head=1, op="add", value=vector(d)),
        ],
    ]


def test_each_op_on_each_tap_equals_transformers_with_that_hook(hf_pair):
    hf_model, ex = hf_pair
    plain = our_logits(ex, [])
    for edits in cases(ex.config):
        ours = our_logits(ex, edits)
        theirs = hooked_logits(hf_model, ids_of(ex), edits, ex.config.n_layers, ex.config.head_dim)
        assert torch.allclose(ours, theirs, atol=1e-4), edits
        assert not torch.allclose(ours, plain, atol=1e-3), f"{edits} changed nothing"


def patched_attention(monkeypatch, hf_model, layer: int, head: int, query: int, key: int, change):
    """transformers' eager attention replaced by one whose additive mask at (layer, head, query, key)
    is changed by `change` (-inf: knocked out); the weights it computed there kept in `seen`."""
    module = sys.modules[type(hf_model.model.layers[0].self_attn).__module__]
    original, seen = module.eager_attention_forward, {}

    def attention(attn, query_states, key_states, value_states, attention_mask, *args, **kwargs):
        if attn.layer_idx == layer:
            n_keys = key_states.shape[-2]
            mask = attention_mask[:, :, :, :n_keys]
            mask = mask.expand(-1, query_states.shape[1], -1, -1).clone()  # [B, H, Q, K]
            mask[:, head, query, key] = change(mask[:, head, query, key])
            output, weights = original(attn, query_states, key_states, value_states, mask, *args, **kwargs)
            seen["weights"] = weights
            return output, weights
        return original(attn, query_states, key_states, value_states, attention_mask, *args, **kwargs)

    monkeypatch.setattr(module, "eager_attention_forward", attention)
    return seen


@pytest.mark.parametrize("op", ["block", "add"])
def test_a_cell_knocked_out_or_added_to_equals_a_custom_attention_function(hf_pair, monkeypatch, op):
    hf_model, ex = hf_pair
    ids = ids_of(ex)
    layer, head, query, key = 1, 6, len(ids) - 1, 3
    value = None if op == "block" else 2.5
    run = ex.run(ids=ids, edits=[Edit("scores", layer, head=head, position=(query, key), op=op, value=value)])
    change = (lambda m: m - torch.inf) if op == "block" else (lambda m: m + value)
    seen = patched_attention(monkeypatch, hf_model, layer, head, query, key, change)
    with torch.no_grad():
        theirs = hf_model(torch.tensor([ids])).logits[0]
    assert torch.allclose(run.logits, theirs, atol=1e-4)
    # the views of the edited run: its attention maps, every way they are read
    probs = run.attention(layer).probs  # [H, N, N]
    assert torch.allclose(probs, seen["weights"][0], atol=1e-5)
    if op == "block":
        assert probs[head, query, key] == 0 and torch.isclose(probs[head, query].sum(), torch.tensor(1.0))
        assert run.attention(layer).masked[head, query, key] == -torch.inf
    rows = run.attention_rows(layer, [query], head=head).probs[0, 0]
    assert torch.allclose(rows, probs[head, query], atol=1e-6)
    assert torch.allclose(run.sdpa_output(layer), run.attention(layer).output, atol=1e-4)
    plain = ex.run(ids=ids).attention(layer).probs
    assert not torch.allclose(plain[head, query], probs[head, query], atol=1e-3)
    assert torch.allclose(plain[head, :query], probs[head, :query])  # no other row changed


def test_a_knockout_keeps_the_fast_path_and_every_view_shows_the_edited_model(hf_pair):
    _, ex = hf_pair
    ids = ids_of(ex)
    layer, head, query = 2, 1, len(ids) - 1
    knockout = Edit("scores", layer, head=head, position=[(query, 0), (query, 1)], op="block")
    run = ex.run(ids=ids, edits=[knockout])
    probs = run.attention(layer).probs
    assert probs[head, query, :2].eq(0).all() and probs[head, query, 2:].sum().item() == pytest.approx(1.0)
    lens = run.logit_lens()  # its last layer is the edited run's output
    assert torch.allclose(lens.logits(ex.config.n_layers), run.logits, atol=1e-4)
    attribution = run.logit_attribution(ex.tokenizer.decode([ids[1]]), position=-1)
    parts = (
        attribution.heads.sum() + attribution.mlps.sum() + attribution.biases.sum() + attribution.embedding
    )
    assert float(parts) == pytest.approx(attribution.total, abs=1e-3)
    z = Edit("z", 0, head=1, op="scale", value=0.0)
    zeroed = ex.run(ids=ids, edits=[z])
    assert torch.allclose(zeroed.attention(0).output, zeroed.sdpa_output(0), atol=1e-5)
    # an edit of the stream is a part of its own, at the layer it writes (L: the final norm's input)
    g = torch.Generator().manual_seed(5)
    stream = [
        Edit("resid", layer, op="add", value=torch.randn(ex.config.hidden_size, generator=g))
        for layer in (0, 1)
    ]
    stream.append(Edit("resid", ex.config.n_layers, position=-1, op="scale", value=1.5))
    steered = ex.run(ids=ids, edits=stream)
    answer = ex.tokenizer.decode([ids[1]])
    split = steered.logit_attribution(answer)
    parts = (
        split.heads.sum() + split.mlps.sum() + split.biases.sum() + split.embedding + split.stream_edits.sum()
    )
    assert float(parts) == pytest.approx(split.total, abs=1e-3)
    assert split.total == pytest.approx(float(steered.logits[-1, ids[1]]), abs=1e-4)
    assert split.stream_edits[[0, 1, ex.config.n_layers]].abs().min() > 1e-3
    assert split.stream_edits[2 : ex.config.n_layers].abs().max() < 1e-4
    # the QK readings redo knockouts: the heads' writes they split the stream into are the knocked run's
    from explorer.engine import qk

    z, _ = qk._attention_at(run, layer, qk._pass(run, query + 1), [query])  # [H, 1, d]
    written = ex.model.layers[layer].self_attn.merge_heads(z[None].to(ex.dtype))[0, 0].float()
    assert torch.allclose(written, run.attention(layer).output[query], atol=1e-5)
    split = run.score_attribution(layer, head, query, 2)
    assert float(split.table.sum()) == pytest.approx(split.score, abs=1e-3)
    with pytest.raises(ValueError, match="Score attribution does not yet read a run with edits of z"):
        zeroed.score_attribution(layer, head, query, 2)


def test_bad_edits_are_refused_with_a_message_and_nothing_runs(hf_pair):
    _, ex = hf_pair
    c, n = ex.config, len(ids_of(ex))
    bad = {
        "unknown tap 'attn'": Edit("attn", 0),
        r"layer must be an integer in \[0, 2\]": Edit("z", 3, head=0, value=0.0),
        r"layer must be an integer in \[0, 3\]": Edit("resid", 4, value=0.0),
        r"kv head must be an integer in \[0, 1\]": Edit("k", 0, head=2, value=0.0),
        "mlp has no heads": Edit("mlp", 0, head=1, value=0.0),
        f"position {n} is outside the sequence's {n} positions": Edit("resid", 0, position=n, value=0.0),
        "does not fit the region it writes": Edit("z", 0, head=0, value=torch.zeros(c.head_dim + 1)),
        "NaN or infinite": Edit("mlp", 0, value=torch.tensor([float("nan")])),
        "block is an op on scores": Edit("z", 0, head=0, op="block"),
        "block takes \\(query, key\\) cells": Edit("scores", 0, head=0, position=4, op="block"),
        "every key query 0 sees is blocked": Edit("scores", 0, position=(0, 0), op="block"),
        "comes after query": Edit("scores", 0, position=(2, 3), op="block"),
        "unknown op 'zero'": Edit("z", 0, op="zero"),
        "fn takes a callable": Edit("v", 0, op="fn", value=1.0),
        "set needs a value": Edit("q", 0, op="set"),
        "a score edit's value is one number": Edit("scores", 0, op="add", value=torch.ones(2)),
    }
    before = ex.forward_count
    for message, edit in bad.items():
        with pytest.raises(ValueError, match=message):
            ex.run(ids=ids_of(ex), edits=[Edit("mlp", 0, op="scale", value=2.0), edit])
    assert ex.forward_count == before  # refused before the forward: nothing half-applied
    wrong = Edit("mlp", 0, op="fn", value=lambda region: region[..., :3])
    with pytest.raises(ValueError, match="fn returned a tensor of shape"):
        ex.run(ids=ids_of(ex), edits=[wrong])


def hf_generate_hooked(hf_model, ids: list[int], layer: int, vector: torch.Tensor, new: int) -> list[int]:
    """transformers' greedy `generate` with `vector` added to the stream entering `layer` everywhere."""

    def add(point, at, value):
        return value + vector if (point, at) == ("resid", layer) else None

    with torch.no_grad(), hf.hooks(hf_model, add):
        out = hf_model.generate(
            torch.tensor([ids]), do_sample=False, max_new_tokens=new, pad_token_id=0, eos_token_id=None
        )
    return out[0].tolist()


def test_greedy_generation_under_an_edit_equals_transformers_generate_with_that_hook(hf_pair):
    hf_model, ex = hf_pair
    prompt, new, layer = "To be, or not to be", 8, 1
    vector = 3.0 * torch.randn(ex.config.hidden_size, generator=torch.Generator().manual_seed(1))
    steer = [Edit("resid", layer, op="add", value=vector)]
    steered = ex.generate(prompt, max_new_tokens=new, stop_at_eos=False, edits=steer)
    list(steered)
    expected = hf_generate_hooked(hf_model, steered.prompt_ids, layer, vector, new)
    assert steered.ids == expected
    plain = ex.generate(prompt, max_new_tokens=new, stop_at_eos=False)
    list(plain)
    assert plain.ids != steered.ids  # the edit changed what it says
    zero = ex.generate(
        prompt, max_new_tokens=new, stop_at_eos=False, edits=[Edit("resid", layer, op="add", value=0.0)]
    )
    list(zero)
    assert zero.ids == plain.ids
    # the sequence as a Run is the edited model's: its logits are the steered forward's
    again = ex.run(ids=steered.ids, edits=steer)
    assert torch.allclose(steered.run.logits, again.logits, atol=1e-4)


def masked_in_generation(monkeypatch, hf_model, changes: dict) -> None:
    """transformers' eager attention replaced by one that changes the additive mask at each
    (layer, head, query, key) of `changes` (query an absolute position: a decode step's one query is the
    last key's), by the function given there."""
    module = sys.modules[type(hf_model.model.layers[0].self_attn).__module__]
    original = module.eager_attention_forward

    def attention(attn, query_states, key_states, value_states, attention_mask, *args, **kwargs):
        mine = [(h, q, k, change) for (layer, h, q, k), change in changes.items() if layer == attn.layer_idx]
        if mine:
            (b, heads, n_queries, _), n_keys = query_states.shape, key_states.shape[-2]
            if attention_mask is None:
                attention_mask = query_states.new_zeros(b, 1, n_queries, n_keys)
            attention_mask = attention_mask[:, :, :, :n_keys].expand(-1, heads, -1, -1).clone()
            for head, query, key, change in mine:
                row = query - (n_keys - n_queries)
                if 0 <= row < n_queries:
                    attention_mask[:, head, row, key] = change(attention_mask[:, head, row, key])
        return original(attn, query_states, key_states, value_states, attention_mask, *args, **kwargs)

    monkeypatch.setattr(module, "eager_attention_forward", attention)


def test_greedy_generation_under_score_edits_equals_transformers_generate_with_that_mask(
    hf_pair, monkeypatch
):
    hf_model, ex = hf_pair
    prompt, new = "To be, or not to be", 6
    n = len(ids_of(ex, prompt))
    cells = [(n - 1, 0), (n + 2, 1), (n + 2, n)]  # a prompt query's cell, and a new position's two
    edits = [
        Edit("scores", 1, head=2, position=cells, op="block"),
        Edit("scores", 2, head=0, position=(n + 3, 2), op="add", value=3.0),
    ]
    edited = ex.generate(prompt, max_new_tokens=new, stop_at_eos=False, edits=edits)
    steps = list(edited)
    changes = {(1, 2, q, k): (lambda m: m - torch.inf) for q, k in cells}
    changes[2, 0, n + 3, 2] = lambda m: m + 3.0
    masked_in_generation(monkeypatch, hf_model, changes)
    with torch.no_grad():
        out = hf_model.generate(
            torch.tensor([edited.prompt_ids]),
            do_sample=False,
            max_new_tokens=new,
            pad_token_id=0,
            eos_token_id=None,
        )
    assert edited.ids == out[0].tolist()
    # each step's rows are those the forward attended with: the blocked cells 0, the row renormalised
    assert steps[0].attention[1, 2, 0] == 0 and steps[3].attention[1, 2, [1, n]].eq(0).all()
    run = edited.run
    for layer, head, step in ((1, 2, 0), (1, 2, 3), (2, 0, 4)):
        query = steps[step].position
        expected = run.attention(layer).probs[head, query, : query + 1]
        assert torch.allclose(steps[step].attention[layer, head], expected, atol=1e-5)
    plain = ex.generate(prompt, max_new_tokens=new, stop_at_eos=False)
    plain_steps = list(plain)
    moved = [abs(a.probability - b.probability) for a, b in zip(plain_steps, steps, strict=True)]
    assert moved[0] > 1e-4 and moved[3] > 1e-4  # the edits change what it says at those steps
    assert not torch.allclose(plain_steps[0].attention[1, 2], steps[0].attention[1, 2], atol=1e-3)


def test_the_steering_vector_is_the_difference_of_mean_hidden_states(hf_pair):
    hf_model, ex = hf_pair
    positive, negative = ["To be, or not to be", "that is the question"], ["whether the slings"]
    layer = 2

    def mean_state(text, at):
        with torch.no_grad():
            out = hf_model(torch.tensor([ids_of(ex, text)]), output_hidden_states=True)
        state = out.hidden_states[at][0] if at < ex.config.n_layers else None
        return state.mean(0)

    expected = torch.stack([mean_state(t, layer) for t in positive]).mean(0) - mean_state(negative[0], layer)
    assert torch.allclose(ex.steering_vector(positive, negative, layer), expected, atol=1e-5)
    with pytest.raises(ValueError, match="the negative texts are a list"):
        ex.steering_vector(positive, [], layer)


def test_steering_readings_equal_transformers_with_the_same_hook(hf_pair):
    from explorer.engine import steering

    hf_model, ex = hf_pair
    layer, held_out = 1, "whether 'tis nobler in the mind to suffer the slings"
    vector = ex.steering_vector(["To be, or not to be"], ["that is the question"], layer)
    edits = [Edit("resid", layer, op="add", value=3.0 * vector)]
    ids = ids_of(ex, held_out)

    def add(point, at, value):
        return value + 3.0 * vector if (point, at) == ("resid", layer) else None

    with torch.no_grad(), hf.hooks(hf_model, add):
        loss = hf_model(torch.tensor([ids]), labels=torch.tensor([ids])).loss
    assert steering.perplexity(ex, held_out, edits) == pytest.approx(float(loss.exp()), rel=1e-4)
    words = ["question", "mind"]
    concept = steering.concept_ids(ex.tokenizer, words)
    assert concept and len(set(concept)) == len(concept)
    readings = steering.compare(ex, "To be, or not", words, held_out, vector, layer, (0.0, 3.0), "Think.", 6)
    assert [r.label for r in readings] == ["plain", "steered ×3", "prompted"]
    steered = readings[1]
    assert steered.held_out_perplexity == pytest.approx(float(loss.exp()), rel=1e-4)
    assert all(0 <= r.concept_probability <= 1 and r.continuation for r in readings)
    with pytest.raises(ValueError, match="the concept's words"):
        steering.concept_ids(ex.tokenizer, [])


def around(edit_at, node_at):
    """One hook: `node_at` (a recorder or a patch) reads and writes after the edits, but the stream
    entering a block before its edit (what `ex.patch_nodes` patches: a resid node is the stream the
    edit then writes on)."""

    def hook(point, layer, value):
        first, second = (node_at, edit_at) if point == "resid" else (edit_at, node_at)
        done = first(point, layer, value)
        after = second(point, layer, value if done is None else done)
        return done if after is None else after

    return hook


def test_nodes_patched_and_attributed_on_an_edited_model_equal_transformers_with_those_hooks(
    hf_pair, monkeypatch
):
    from tests.test_circuits import ANSWER, CORRUPTED, DISTRACTOR, MIDDLE, PAIR, patch_edit, reference_diff

    hf_model, ex = hf_pair
    c = ex.config
    n = len(ids_of(ex, CORRUPTED))
    direction = torch.randn(c.hidden_size, generator=torch.Generator().manual_seed(3))
    edits = [
        Edit("resid", 1, op="add", value=direction),
        Edit("z", 0, head=2, position=MIDDLE, op="scale", value=0.0),
        Edit("scores", 1, head=6, position=(n - 1, 3), op="block"),
    ]
    nodes = [("resid", 1, MIDDLE), ("resid", 2, None), ("z", 1, 6, -1), ("q", 1, 6, -1), ("k", 1, 1, MIDDLE)]
    nodes += [("mlp", 0, MIDDLE), ("v", 0, 1, None)]
    ours = ex.patch_nodes(*PAIR, nodes=nodes, edits=edits)
    plain = ex.patch_nodes(*PAIR, nodes=nodes)
    assert (ours - plain).abs().max() > 1e-2  # the edits change what the patches read

    patched_attention(monkeypatch, hf_model, 1, 6, n - 1, 3, lambda m: m - torch.inf)  # the knockout
    edit_at = edit_hook(edits, c.n_layers, c.head_dim)
    clean_seen = {}

    def record(point, layer, value):
        clean_seen[point, layer] = value[0].detach().clone()

    with torch.no_grad(), hf.hooks(hf_model, around(edit_at, record)):
        hf_model(torch.tensor([ids_of(ex, PAIR[0])]))
    corrupted = ids_of(ex, CORRUPTED)
    for node, value in zip(nodes, ours.tolist(), strict=True):
        reference = reference_diff(
            hf_model, ex, corrupted, around(edit_at, patch_edit(hf_model, clean_seen, node))
        )
        assert abs(value - reference) <= 1e-5, node

    # attribution patching on the edited model: gradient × difference, the gradient through the edits
    corrupted_seen = {}

    def record_corrupted(point, layer, value):
        corrupted_seen[point, layer] = value[0].detach().clone()

    with torch.no_grad(), hf.hooks(hf_model, around(edit_at, record_corrupted)):
        hf_model(torch.tensor([corrupted]))
    leaves = {key: torch.zeros_like(value, requires_grad=True) for key, value in corrupted_seen.items()}

    def leaf(point, layer, value):
        return value + leaves[point, layer][None] if (point, layer) in leaves else None

    with hf.hooks(hf_model, around(edit_at, leaf)):
        logits = hf_model(torch.tensor([corrupted])).logits[0]
    (answer,), (distractor,) = ids_of(ex, ANSWER), ids_of(ex, DISTRACTOR)
    metric = hf.logit_diff(logits, answer, distractor)
    grads = dict(
        zip(leaves, torch.autograd.grad(metric, list(leaves.values()), allow_unused=True), strict=True)
    )
    estimated = ex.attribution_patching(*PAIR, nodes=nodes, edits=edits)
    for node, value in zip(nodes, estimated.tolist(), strict=True):
        kind, layer, *head, pos = node
        where = slice(None) if pos is None else pos
        difference, grad = clean_seen[kind, layer] - corrupted_seen[kind, layer], grads[kind, layer]
        if head:
            part = slice(head[0] * c.head_dim, (head[0] + 1) * c.head_dim)
            if kind in ("k", "v"):
                part = hf.head_slice(hf_model, head[0])
            difference, grad = difference[..., part], grad[..., part]
        assert abs(value - float((difference[where] * grad[where]).sum())) <= 1e-4, node
    # AtP* recomputes the knocked-out layer's pattern with its cell blocked: never farther from the
    # exact effect than AtP by more than rounding
    exact = float(ours[3]) - reference_diff(hf_model, ex, corrupted, edit_at)
    fixed = ex.attribution_patching(*PAIR, nodes=[nodes[3]], qk_fix=True, edits=edits)
    assert abs(float(fixed[0]) - exact) <= abs(float(estimated[3]) - exact) + 1e-3

"""The logit lens, direct logit attribution and attention to one token, against transformers on the same
checkpoints: a llama with GQA and untied embeddings, a qwen2 with q/k/v biases (tied), and a llama with
o_proj biases."""

from __future__ import annotations

import pytest
import torch

import explorer
from explorer import PromptError
from explorer.engine import lens as lens_module
from tests.conftest import HF_CONFIGS, make_hf_checkpoint

PROMPT = "To be, or not to be, that is the question: whether the"
ANSWER, DISTRACTOR = " to", " be"


@pytest.fixture(scope="module", params=["llama-untied", "qwen2-bias", "llama-linear-rope-bias"])
def pair(request, tmp_path_factory, tiny_tokenizer):
    """The HF model and ours on the same weights, and our run of PROMPT."""
    model_type, overrides = HF_CONFIGS[request.param]
    directory = tmp_path_factory.mktemp(request.param)
    hf_model = make_hf_checkpoint(directory, tiny_tokenizer, model_type, **overrides)
    if request.param == "llama-linear-rope-bias":  # HF zero-initialises o_proj's bias; give it values
        with torch.no_grad():
            for layer in hf_model.model.layers:
                layer.self_attn.o_proj.bias.normal_(std=0.02, generator=torch.Generator().manual_seed(1))
        hf_model.save_pretrained(directory)
    ours = explorer.load(directory, device="cpu")
    return hf_model, ours.run(PROMPT)


def hf_hidden_states(hf_model, ids):
    with torch.no_grad():
        out = hf_model(torch.tensor([ids]), output_hidden_states=True)
    return out.hidden_states, out.logits[0]


def test_the_lens_is_lm_head_of_the_normed_stream_and_the_models_logits_at_the_last_layer(pair):
    hf_model, run = pair
    hidden, logits = hf_hidden_states(hf_model, run.ids)
    lens = run.logit_lens()
    n_layers = run.config.n_layers
    for layer in range(n_layers + 1):
        with torch.no_grad():  # HF's last hidden state is already normed: the norm applies once there
            expected = (
                logits if layer == n_layers else hf_model.lm_head(hf_model.model.norm(hidden[layer][0]))
            )
        torch.testing.assert_close(lens.logits(layer), expected, atol=1e-4, rtol=0)
        probs = expected.softmax(-1)
        top = probs.topk(5, dim=-1)
        torch.testing.assert_close(lens.top_probs[layer], top.values, atol=1e-5, rtol=0)
        final = logits.log_softmax(-1)
        kl = (final.exp() * (final - expected.log_softmax(-1))).sum(-1)
        torch.testing.assert_close(lens.kl_to_final[layer], kl, atol=1e-4, rtol=0)
    assert lens.positions == list(range(run.n_tokens))
    assert torch.equal(lens.top_ids[-1, :, 0], logits.argmax(-1)) and lens.kl_to_final[-1].abs().max() < 1e-5


def test_the_lens_at_chosen_positions_is_the_same_as_at_all_and_is_computed_in_tiles(pair, monkeypatch):
    _, run = pair
    whole = run.logit_lens(top_k=3)
    monkeypatch.setattr(lens_module, "LENS_TILE_BYTES", 1)  # one position a block
    monkeypatch.setattr(lens_module, "LENS_SLAB", 7)  # the vocabulary in uneven slabs of 7 tokens
    picked = run.logit_lens(positions=[-1, 0, 5], top_k=3)
    assert picked.positions == [run.n_tokens - 1, 0, 5]
    assert torch.equal(picked.top_ids, whole.top_ids[:, [run.n_tokens - 1, 0, 5]])
    torch.testing.assert_close(picked.top_probs, whole.top_probs[:, [run.n_tokens - 1, 0, 5]])
    torch.testing.assert_close(picked.kl_to_final, whole.kl_to_final[:, [run.n_tokens - 1, 0, 5]])
    wide = run.logit_lens(positions=[2], top_k=10)  # more top tokens than a slab holds
    torch.testing.assert_close(wide.top_probs[..., :3], whole.top_probs[:, [2]])


@torch.no_grad()
def hf_direct_attribution(hf_model, ids, answer_id, distractor_id, position):
    """The reference: forward pre-hooks on o_proj (each head's slice of its input times its columns of
    W_O), forward hooks on the MLPs and the embedding, and the final norm's input, whose RMS is frozen."""
    config, layers = hf_model.config, hf_model.model.layers
    d = config.head_dim
    captured = {"o_proj": {}, "mlp": {}}
    handles = [
        hf_model.model.embed_tokens.register_forward_hook(lambda m, a, out: captured.update(embed=out))
    ]
    handles.append(hf_model.model.norm.register_forward_pre_hook(lambda m, a: captured.update(final=a[0])))
    for i, layer in enumerate(layers):
        handles.append(
            layer.self_attn.o_proj.register_forward_pre_hook(
                lambda m, a, i=i: captured["o_proj"].update({i: a[0]})
            )
        )
        handles.append(
            layer.mlp.register_forward_hook(lambda m, a, out, i=i: captured["mlp"].update({i: out}))
        )
    try:
        logits = hf_model(torch.tensor([ids])).logits[0]
    finally:
        for handle in handles:
            handle.remove()
    unembed = hf_model.lm_head.weight[answer_id] - hf_model.lm_head.weight[distractor_id]
    final = captured["final"][0, position]
    scale = torch.rsqrt(final.pow(2).mean() + hf_model.model.norm.variance_epsilon)
    direction = hf_model.model.norm.weight * unembed * scale
    heads = torch.zeros(config.num_hidden_layers, config.num_attention_heads)
    for i, layer in enumerate(layers):
        z = captured["o_proj"][i][0, position]  # [H·d]
        w_o = layer.self_attn.o_proj.weight  # [hidden, H·d]
        for h in range(config.num_attention_heads):
            heads[i, h] = (z[h * d : (h + 1) * d] @ w_o[:, h * d : (h + 1) * d].T) @ direction
    mlps = torch.stack([captured["mlp"][i][0, position] @ direction for i in range(len(layers))])
    embedding = captured["embed"][0, position] @ direction
    total = logits[position, answer_id] - logits[position, distractor_id]
    return heads, mlps, float(embedding), float(total)


@pytest.mark.parametrize("position", [-1, 7])
def test_direct_attribution_matches_hooks_on_transformers_and_sums_to_the_logit(pair, position):
    hf_model, run = pair
    a = run.logit_attribution(ANSWER, DISTRACTOR, position=position)
    heads, mlps, embedding, total = hf_direct_attribution(
        hf_model, run.ids, a.answer_id, a.distractor_id, position
    )
    torch.testing.assert_close(a.heads, heads, atol=1e-4, rtol=0)
    torch.testing.assert_close(a.mlps, mlps, atol=1e-4, rtol=0)
    assert a.embedding == pytest.approx(embedding, abs=1e-4) and a.total == pytest.approx(total, abs=1e-4)
    parts = a.embedding + float(a.heads.sum() + a.mlps.sum() + a.biases.sum())
    assert parts == pytest.approx(a.total, abs=1e-4)
    has_bias = run.explorer.model.layers[0].self_attn.o_proj.bias is not None
    assert (a.biases.abs().max() > 0) == has_bias


def test_attribution_of_one_token_sums_to_its_logit_and_an_ablated_head_writes_nothing(pair):
    _, run = pair
    a = run.logit_attribution(ANSWER)
    assert a.embedding + float(a.heads.sum() + a.mlps.sum() + a.biases.sum()) == pytest.approx(
        float(run.logits[-1, a.answer_id]), abs=1e-4
    )
    ablated = run.explorer.run(PROMPT, ablate=[(1, 2)]).logit_attribution(ANSWER)
    assert ablated.heads[1, 2] == 0 and ablated.embedding + float(
        ablated.heads.sum() + ablated.mlps.sum() + ablated.biases.sum()
    ) == pytest.approx(ablated.total, abs=1e-4)


def test_an_answer_of_several_tokens_is_refused_naming_them(pair):
    _, run = pair
    with pytest.raises(PromptError, match="The answer “ question” is 6 tokens"):
        run.logit_attribution(" question")
    with pytest.raises(ValueError, match="position must be a whole number"):
        run.logit_attribution(ANSWER, position=run.n_tokens)


def test_attention_to_a_token_is_every_heads_eager_weight(pair):
    hf_model, run = pair
    with torch.no_grad():
        attentions = hf_model(torch.tensor([run.ids]), output_attentions=True).attentions
    for key in (0, 3, run.n_tokens - 1):
        weights = run.attention_to(key)
        expected = torch.stack([layer[0, :, -1, key] for layer in attentions])
        torch.testing.assert_close(weights, expected, atol=1e-5, rtol=0)
        eager = torch.stack([run.attention(layer).probs[:, -1, key] for layer in range(run.config.n_layers)])
        torch.testing.assert_close(weights, eager, atol=1e-5, rtol=0)
    assert run.attention_to(9, query=4).abs().max() == 0  # a key after the query is never read


# --- the real model: SmolLM2-135M-Instruct, as transformers reads its GGUF ---------------------------

IOI = "When Mary and John went to the store, John gave a drink to"


@pytest.fixture(scope="module")
def smollm2_hf(smollm2_path):
    from tests.test_gguf import hf_from_gguf

    return hf_from_gguf(smollm2_path)[0]


@pytest.mark.slow
def test_smollm2_lens_attribution_and_attention_to_match_transformers(smollm2_explorer, smollm2_hf):
    run = smollm2_explorer.run(IOI)
    hidden, logits = hf_hidden_states(smollm2_hf, run.ids)
    lens = run.logit_lens()
    for layer in (0, 10, 20, run.config.n_layers):
        with torch.no_grad():
            expected = (
                logits
                if layer == run.config.n_layers
                else smollm2_hf.lm_head(smollm2_hf.model.norm(hidden[layer][0]))
            )
        torch.testing.assert_close(lens.logits(layer), expected, atol=5e-4, rtol=0)
        torch.testing.assert_close(
            lens.top_probs[layer], expected.softmax(-1).topk(5).values, atol=5e-4, rtol=0
        )
    a = run.logit_attribution(" Mary", " John")
    heads, mlps, embedding, total = hf_direct_attribution(
        smollm2_hf, run.ids, a.answer_id, a.distractor_id, -1
    )
    torch.testing.assert_close(a.heads, heads, atol=5e-4, rtol=0)
    torch.testing.assert_close(a.mlps, mlps, atol=5e-4, rtol=0)
    assert a.total == pytest.approx(total, abs=5e-4) and a.embedding == pytest.approx(embedding, abs=5e-4)
    with torch.no_grad():
        attentions = smollm2_hf(torch.tensor([run.ids]), output_attentions=True).attentions
    expected = torch.stack([layer[0, :, -1, 1] for layer in attentions])
    torch.testing.assert_close(run.attention_to(1), expected, atol=5e-4, rtol=0)


@pytest.mark.slow
def test_on_smollm2_the_ioi_answer_is_the_lens_top_token_at_the_output_not_at_the_embeddings(
    smollm2_explorer,
):
    run = smollm2_explorer.run(IOI)
    lens = run.logit_lens(positions=[-1])
    mary = smollm2_explorer.tokenizer.encode(" Mary", add_special_tokens=False).ids[0]
    assert lens.top_ids[-1, 0, 0] == mary and lens.top_ids[0, 0, 0] != mary
    a = run.logit_attribution(" Mary", " John")
    assert a.total > 0 and a.heads.max() > 1  # some head writes " Mary" over " John" directly


# --- the Lens tab, served ----------------------------------------------------------------------------


def test_the_lens_tab_draws_the_grid_the_rank_and_the_attribution_the_engine_computes(gqa_checkpoint):
    import json

    from explorer.app.policy import Policy
    from explorer.app.workspace import Workspace
    from explorer.tools.stress_client import App, status_of
    from tests.conftest import served

    workspace = Workspace(gqa_checkpoint, device="cpu", policy=Policy())
    with served(workspace) as url:
        app = App(url, timeout=60)
        assert app.call("run", [PROMPT, 0, 0], "lens")[0]
        ok, (status, _, _, position, grid, rank, attribution) = app.call("lens", [0, "", "", 0], "lens")
        run = workspace.run("", PROMPT)
        assert ok and status_of([status]) == "" and position["value"] == run.n_tokens - 1
        cells = json.loads(grid["plot"])["data"][0]
        lens = run.logit_lens(top_k=5)
        assert len(cells["text"]) == run.config.n_layers + 1 and len(cells["text"][0]) == run.n_tokens
        assert "KL to the output" in cells["customdata"][0][0]
        assert (
            "(the model's prediction there) after every block"
            in json.loads(rank["plot"])["layout"]["title"]["text"]
        )
        ok, (status, rank, attribution, _) = app.call("attribution", [ANSWER, DISTRACTOR, 5], "lens")
        a = run.logit_attribution(ANSWER, DISTRACTOR, 5)
        title = json.loads(attribution["plot"])["layout"]["title"]["text"]
        assert ok and f"{a.total:+.3f} in all" in title and lens.top_probs.shape[1] == run.n_tokens
        ok, (status, *_) = app.call("attribution", [" question", "", 5], "lens")
        assert ok and "is 6 tokens" in status_of([status])
        ok, (status, panel, position, heads) = app.call("attention_to", [3], "lens")  # a token's position
        title = json.loads(heads["plot"])["layout"]["title"]["text"]
        assert ok and status_of([status]) == "" and "(position 3)" in title and position == 3
        assert panel["open"] and panel["visible"]
        refused = ((-1, "There is no position -1"), (run.n_tokens, "There is no position"))
        for bad, message in refused:
            ok, (status, *_) = app.call("attention_to", [bad], "lens")
            assert ok and message in status_of([status])


def test_a_tokens_rank_and_probability_across_layers_are_the_lens_logits(pair):
    _, run = pair
    lens = run.logit_lens(positions=[4])
    token = int(lens.top_ids[2, 0, 1])  # the second likeliest after two layers: rank 2 there
    ranks, probs = lens_module.token_across_layers(run, token, position=4)
    for layer in range(run.config.n_layers + 1):
        logits = lens.logits(layer)[0]
        assert ranks[layer] == int((logits > logits[token]).sum()) + 1
        assert float(probs[layer]) == pytest.approx(float(logits.softmax(-1)[token]), abs=1e-6)
    assert ranks[2] == 2


def test_the_grid_labels_a_top_token_holding_part_of_a_character_by_what_it_reads_there():
    import numpy as np

    from explorer.figures.lens import lens_figure
    from explorer.views.lens import top_token_labels

    ours = explorer.load(device="cpu")  # the bundled model's byte-level BPE splits "è" in two
    run = ours.run("Crème brûlée")
    first, second = [i for i in run.ids if "\ufffd" in ours.tokenizer.decode([i])][:2]
    at = run.ids.index(first)  # "è¹": after it, "è²" ends the character; before it, "è¹" begins one
    labels = top_token_labels(run, [at, at - 1], [[[second, first], [first, second]]])
    assert labels[0][0][0].hover == "è² (byte 2 of 2 of “è”)"
    assert labels[0][1][0].hover.startswith("◌¹ (byte 1 of 2 of a 2-byte character")
    assert "lone byte" in labels[0][1][1].hover  # a continuation byte with nothing to continue
    probs = np.full((1, 2, 2), 0.5, dtype=np.float32)
    fig = json_of(lens_figure(run.tokens, [at, at - 1], labels, probs, np.zeros((1, 2), np.float32)))
    assert fig["data"][0]["text"][0] == ["è²", "◌¹"]
    hover = fig["data"][0]["customdata"][0][0]
    assert hover.startswith("the embeddings<br>“è²” (byte 2 of 2 of “è”) 0.5<br>“◌¹” (byte 1")


def json_of(fig):
    import json

    return json.loads(fig.to_json())


def test_the_heads_looking_at_a_token_are_its_attention_weights_from_the_last_position(pair):
    from explorer.views.lens import heads_looking_at

    _, run = pair
    fig = heads_looking_at(run, 3).figure()
    assert torch.allclose(torch.tensor(fig.data[0].z), run.attention_to(3, -1), atol=1e-6)
    title = fig.layout.title.text
    assert "(position 3)" in title and f"(position {run.n_tokens - 1})" in title

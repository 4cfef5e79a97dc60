"""A score split into the sources that built it (`run.score_attribution`, `run.key_drivers`) is the same
split made in transformers' eager model with hooks: o_proj's input split per head, each MLP's output as
the model adds it, the rotary cos/sin the model passes, and the model's own norms' scales frozen at the
real values. Held on a Llama with GQA and o_proj biases, a Qwen2 with q/k biases, a Qwen3 with QK-norm and
a Gemma 3 with sliding layers."""

from __future__ import annotations

import pytest
import torch
from transformers.models.llama.modeling_llama import rotate_half

import explorer
from explorer.engine.qk import sources
from tests.conftest import HF_CONFIGS, PROMPT, make_hf_checkpoint

FAMILIES = ["llama-linear-rope-bias", "qwen2-bias", "qwen3-qk-norm", "gemma3-sliding"]


@pytest.fixture(scope="module", params=FAMILIES)
def hf_pair(request, tmp_path_factory, tiny_tokenizer):
    model_type, overrides = HF_CONFIGS[request.param]
    directory = tmp_path_factory.mktemp(request.param)
    hf_model = make_hf_checkpoint(directory, tiny_tokenizer, model_type, **overrides)
    if request.param.startswith("llama"):  # HF zero-initialises biases; give q, k, v and o values
        with torch.no_grad():
            for layer in hf_model.model.layers:
                for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
                    getattr(layer.self_attn, proj).bias.normal_(std=0.5)
        hf_model.save_pretrained(directory)
    ex = explorer.load(directory, device="cpu")
    return Reference(hf_model, ex.run(PROMPT).ids), ex.run(PROMPT)


def frozen_scale(norm, x: torch.Tensor) -> torch.Tensor:
    """What transformers' RMSNorm `norm` multiplies x by (its weight, or 1 + weight in Gemma), at x's RMS;
    checked against the module itself."""
    offset = 1.0 if type(norm).__name__.startswith("Gemma") else 0.0
    eps = getattr(norm, "eps", None) or norm.variance_epsilon
    scale = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * (offset + norm.weight)
    torch.testing.assert_close(x * scale, norm(x), atol=1e-5, rtol=1e-5)
    return scale


class Reference:
    """One eager forward of transformers' model, read by hooks, and the split made from what they read."""

    def __init__(self, hf_model, ids: list[int]):
        self.model, self.config, self.ids = hf_model, hf_model.config, ids
        self.gemma = hf_model.config.model_type.startswith("gemma")
        seen = {name: {} for name in ("stream", "z", "y", "mlp", "rotary")}
        handles = []

        def keep(name, layer, value):
            seen[name][layer] = value[0].detach().clone()

        for i, layer in enumerate(hf_model.model.layers):
            attn = layer.self_attn
            handles += [
                layer.register_forward_pre_hook(
                    lambda m, a, k, i=i: keep("stream", i, a[0] if a else k["hidden_states"]),
                    with_kwargs=True,
                ),
                attn.register_forward_pre_hook(
                    lambda m, a, k, i=i: seen["rotary"].__setitem__(
                        i, tuple(t[0].clone() for t in k["position_embeddings"])
                    ),
                    with_kwargs=True,
                ),
                attn.o_proj.register_forward_pre_hook(lambda m, a, i=i: keep("z", i, a[0])),
                attn.o_proj.register_forward_hook(lambda m, a, out, i=i: keep("y", i, out)),
                (layer.post_feedforward_layernorm if self.gemma else layer.mlp).register_forward_hook(
                    lambda m, a, out, i=i: keep("mlp", i, out)
                ),
            ]
        try:
            with torch.no_grad():
                hf_model(torch.tensor([ids]))
        finally:
            for handle in handles:
                handle.remove()
        self.seen = seen

    def sources_at(self, layer: int, position: int) -> torch.Tensor:
        """What the embedding, each earlier head, o_proj bias and MLP wrote at `position`.  # [S', hidden]"""
        seen, c = self.seen, self.config
        parts = [seen["stream"][0][position][None]]
        for earlier in range(layer):
            block = self.model.model.layers[earlier]
            o_proj, d = block.self_attn.o_proj, c.head_dim
            z = seen["z"][earlier][position]  # [H·d]
            heads = [
                o_proj.weight[:, h * d : (h + 1) * d] @ z[h * d : (h + 1) * d]
                for h in range(c.num_attention_heads)
            ]
            written = torch.stack(heads + ([o_proj.bias] if o_proj.bias is not None else []))
            if self.gemma:
                written = written * frozen_scale(block.post_attention_layernorm, seen["y"][earlier][position])
            parts += [written, seen["mlp"][earlier][position][None]]
        parts = torch.cat(parts)
        torch.testing.assert_close(parts.sum(0), seen["stream"][layer][position], atol=1e-4, rtol=1e-4)
        return parts

    def side(self, layer: int, proj_name: str, norm_name: str, index: int, position: int) -> torch.Tensor:
        """Each source's part of head `index`'s query (or key) at `position`, turned.  # [S, d]"""
        block = self.model.model.layers[layer]
        attn, d = block.self_attn, self.config.head_dim
        proj = getattr(attn, proj_name)
        stream = self.seen["stream"][layer][position]
        read = self.sources_at(layer, position) * frozen_scale(block.input_layernorm, stream)
        rows = slice(index * d, (index + 1) * d)
        projected = read @ proj.weight[rows].T
        if proj.bias is not None:
            projected = torch.cat([projected, proj.bias[rows][None]])
        norm = getattr(attn, norm_name, None)
        if norm is not None:
            real = proj(block.input_layernorm(stream))[rows]
            projected = projected * frozen_scale(norm, real)
        cos, sin = (t[position] for t in self.seen["rotary"][layer])
        return projected * cos + rotate_half(projected) * sin

    def table(self, layer: int, head: int, query: int, key: int) -> torch.Tensor:
        attn = self.model.model.layers[layer].self_attn
        kv = head // (self.config.num_attention_heads // self.config.num_key_value_heads)
        with torch.no_grad():
            q = self.side(layer, "q_proj", "q_norm", head, query)
            k = self.side(layer, "k_proj", "k_norm", kv, key)
            return attn.scaling * q @ k.T


def cases(run):
    """(layer, head, query, key): the last layer (every earlier source), a head of each kv group, a key
    far back (outside a sliding window), the query itself, and a masked key after it."""
    n, last = run.n_tokens, run.config.n_layers - 1
    return [
        (last, 5, n - 1, 2),
        (last, 0, n - 1, n - 1),
        (1, 3, n - 4, n - 7),
        (0, 6, 9, 4),
        (last, 2, 10, 20),
    ]


def test_a_scores_table_is_the_split_made_in_transformers_with_hooks(hf_pair):
    reference, run = hf_pair
    for layer, head, query, key in cases(run):
        a = run.score_attribution(layer, head, query, key)
        expected = reference.table(layer, head, query, key)
        assert a.table.shape == expected.shape == (len(a.query_sources), len(a.key_sources))
        assert a.query_sources == a.key_sources == sources(run.config, layer)
        assert (a.table - expected).abs().max() <= 1e-4 * expected.abs().max()
        assert abs(float(a.table.sum()) - a.score) <= 1e-4 * max(1.0, abs(a.score))
        assert a.score == pytest.approx(float(run.attention(layer).scaled[head, query, key]), abs=1e-5)
        assert a.allowed == bool(run.attention(layer).mask[query, key])
    assert expected.abs().max() > 0.1 and (expected[1:].abs().max() > 1e-3 if layer else True)


def test_key_drivers_are_the_key_side_of_the_hooked_split_at_every_key(hf_pair):
    reference, run = hf_pair
    layer, query = run.config.n_layers - 1, run.n_tokens - 1
    for head in (1, 6):
        d = run.key_drivers(layer, head, query)
        mask = run.attention(layer).mask[query]
        assert d.parts.shape == (len(d.sources), run.n_tokens) and d.sources == sources(run.config, layer)
        assert not d.parts[:, ~mask].any() and not d.scores[~mask].any()
        expected = torch.zeros_like(d.parts)
        for key in torch.nonzero(mask).flatten().tolist():
            expected[:, key] = reference.table(layer, head, query, key).sum(0)
        assert (d.parts - expected).abs().max() <= 1e-4 * expected.abs().max()
        torch.testing.assert_close(d.parts.sum(0), d.scores, atol=1e-4, rtol=1e-5)
        torch.testing.assert_close(
            d.scores[mask], run.attention(layer).scaled[head, query, mask], atol=1e-5, rtol=0
        )


def test_a_split_refuses_a_mean_ablated_run_and_follows_a_zero_ablated_one(hf_pair):
    _, run = hf_pair
    ex = run.explorer
    with pytest.raises(ValueError, match="mean-ablated"):
        ex.run(PROMPT, ablate=[(0, 1)], ablate_mode="mean").score_attribution(1, 0, 10, 3)
    ablated = ex.run(PROMPT, ablate=[(0, 1)])
    a = ablated.score_attribution(1, 0, 10, 3)
    row = a.query_sources.index(("head", 0, 1))
    assert not a.table[row].any() and not a.table[:, row].any()  # the zeroed head wrote nothing
    assert abs(float(a.table.sum()) - a.score) <= 1e-4 * max(1.0, abs(a.score))
    with pytest.raises(ValueError, match="head"):
        run.score_attribution(0, run.config.n_heads, 0, 0)
    with pytest.raises(ValueError, match="key"):
        run.score_attribution(0, 0, 0, run.n_tokens)


def dense_composition(hf_model) -> dict[str, torch.Tensor]:
    """Q-, K- and V-composition from transformers' weights as whole hidden × hidden matrices, float64:
    W_Q', W_K', W_V', W_O' with the norms' weights folded in as the model applies them."""
    c, gemma = hf_model.config, hf_model.config.model_type.startswith("gemma")
    d, n_heads, group = c.head_dim, c.num_attention_heads, c.num_attention_heads // c.num_key_value_heads

    def applied(norm):
        return (1.0 if gemma else 0.0) + norm.weight.double()

    qk, ov = [], []
    for block in hf_model.model.layers:
        attn, w_in = block.self_attn, applied(block.input_layernorm)
        layer_qk, layer_ov = [], []
        for head in range(n_heads):
            rows, kv_rows = slice(head * d, (head + 1) * d), slice(head // group * d, (head // group + 1) * d)
            w_q = attn.q_proj.weight.double()[rows] * w_in
            w_k = attn.k_proj.weight.double()[kv_rows] * w_in
            w_v = attn.v_proj.weight.double()[kv_rows] * w_in
            w_o = attn.o_proj.weight.double()[:, rows]
            if getattr(attn, "q_norm", None) is not None:
                w_q, w_k = applied(attn.q_norm)[:, None] * w_q, applied(attn.k_norm)[:, None] * w_k
            if gemma:
                w_o = applied(block.post_attention_layernorm)[:, None] * w_o
            layer_qk.append(w_q.T @ w_k)
            layer_ov.append(w_o @ w_v)
        qk.append(layer_qk)
        ov.append(layer_ov)
    n_layers = len(qk)
    out = {kind: torch.zeros(n_layers, n_heads, n_layers, n_heads, dtype=torch.float64) for kind in "qkv"}
    for l1 in range(n_layers):
        for l2 in range(l1 + 1, n_layers):
            for h1 in range(n_heads):
                for h2 in range(n_heads):
                    a, b, later_ov = qk[l2][h2], ov[l1][h1], ov[l2][h2]
                    out["k"][l1, h1, l2, h2] = (a @ b).norm() / (a.norm() * b.norm())
                    out["q"][l1, h1, l2, h2] = (a.T @ b).norm() / (a.norm() * b.norm())
                    out["v"][l1, h1, l2, h2] = (later_ov @ b).norm() / (later_ov.norm() * b.norm())
    return out


def test_composition_scores_are_the_dense_products_of_transformers_weights(hf_pair):
    reference, run = hf_pair
    c = run.explorer.composition_scores()
    with torch.no_grad():
        expected = dense_composition(reference.model)
    for kind in "qkv":
        got = getattr(c, kind)
        assert got.shape == expected[kind].shape and got.dtype == torch.float32
        assert (got.double() - expected[kind]).abs().max() <= 1e-4
        assert expected[kind].max() > 0.05  # the heads do compose: the test can fail
    assert run.explorer.composition_scores() is c  # weights alone: computed once


REPEATED = (
    "The quick brown fox jumps over the lazy dog near the old river bank while the farmer watches his sheep."
)


@pytest.mark.slow
def test_on_smollm2_the_induction_heads_key_side_is_led_by_a_previous_token_head(
    smollm2_explorer, smollm2_path
):
    """The Overview's top induction head, at a repeated token's score for the token after its earlier
    occurrence: its key side is led by a head whose own map looks one token back (K-composition), which
    taken out of the key's stream takes the attention away (and as the split predicts); the whole table
    is transformers' with hooks, within 5e-4 of its largest entry."""
    from explorer import views
    from tests.test_gguf import hf_from_gguf

    run = smollm2_explorer.run(REPEATED + " " + REPEATED)
    profile = views.head_profile(run)
    layer, head = divmod(int(torch.as_tensor(profile["induction"]).flatten().argmax()), run.config.n_heads)
    query = run.n_tokens - 5  # a token of the second copy
    key = next(j + 1 for j in range(query) if run.ids[j] == run.ids[query])  # after its first occurrence
    a = run.score_attribution(layer, head, query, key)
    assert abs(float(a.table.sum()) - a.score) <= 5e-4 * abs(a.score)
    key_side = a.table.sum(0)
    kind, source_layer, source_head = a.key_sources[int(key_side.argmax())]
    assert kind == "head" and profile["previous_token"][source_layer][source_head] > 0.5
    assert key_side.max() > 0.3 * a.score > 0  # it leads by far: K-composition
    effect = run.source_effect(layer, head, query, key, (kind, source_layer, source_head))
    assert (
        effect.weight > 0.5 and effect.changed_weight < 0.1 * effect.weight
    )  # the causal check: it builds the key
    assert abs(effect.changed_score - effect.predicted_score) <= 0.05 * abs(effect.score)
    hf_model, _ = hf_from_gguf(smollm2_path)
    expected = Reference(hf_model, run.ids).table(layer, head, query, key)
    assert (a.table - expected).abs().max() <= 5e-4 * expected.abs().max()

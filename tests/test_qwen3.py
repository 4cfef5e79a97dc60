"""Qwen3: queries and keys RMS-normed over each head before RoPE (QK-norm), a head size that is not
hidden/heads, GQA and tied embeddings. The logits and every layer's maps are held against transformers
with the other families (tests/test_parity.py, tests/test_gguf.py); here, the QK-norm stage itself."""

from __future__ import annotations

import pytest
import torch

import explorer
from explorer import UnsupportedConfigError
from explorer.engine.config import ModelConfig
from tests.conftest import HF_CONFIGS, make_hf_checkpoint

PROMPT = "To be, or not to be, that is the question"


@pytest.fixture(scope="module")
def pair(tmp_path_factory, tiny_tokenizer):
    model_type, overrides = HF_CONFIGS["qwen3-qk-norm"]
    directory = tmp_path_factory.mktemp("qwen3")
    hf_model = make_hf_checkpoint(directory, tiny_tokenizer, model_type, **overrides)
    return hf_model, explorer.load(directory, device="cpu").run(PROMPT)


def test_the_qk_norm_stage_is_transformers_q_norm_and_k_norm_and_rope_turns_it(pair):
    hf_model, run = pair
    seen = {}
    attn = hf_model.model.layers[1].self_attn
    hooks = [
        attn.q_norm.register_forward_hook(lambda m, a, out: seen.__setitem__("q", out[0].transpose(0, 1))),
        attn.k_norm.register_forward_hook(lambda m, a, out: seen.__setitem__("k", out[0].transpose(0, 1))),
    ]
    try:
        with torch.no_grad():
            hf_model(torch.tensor([run.ids]))
    finally:
        for hook in hooks:
            hook.remove()
    att = run.attention(1)
    assert run.config.qk_norm and run.config.head_dim == 24 != run.config.hidden_size // run.config.n_heads
    torch.testing.assert_close(att.q_normed, seen["q"], atol=1e-5, rtol=0)  # [H, N, d]
    torch.testing.assert_close(att.k_normed, seen["k"], atol=1e-5, rtol=0)  # [H_kv, N, d]
    assert not torch.allclose(att.q_normed, att.q)  # the norm changes them: a stage worth showing
    assert att.q_unrotated is att.q_normed  # RoPE turns the normed queries: rotation keeps their norms
    torch.testing.assert_close(att.q_rot.norm(dim=-1), att.q_normed.norm(dim=-1), atol=1e-5, rtol=1e-5)


def test_a_model_without_qk_norm_has_no_such_stage(gqa_checkpoint):
    att = explorer.load(gqa_checkpoint, device="cpu").run(PROMPT).attention(0)
    assert att.q_normed is None and att.q_unrotated is att.q


def test_qwen3_moe_is_refused_naming_what_is_missing():
    with pytest.raises(UnsupportedConfigError, match="mixture-of-experts"):
        ModelConfig.from_hf_config(
            dict(
                model_type="qwen3_moe",
                vocab_size=320,
                hidden_size=64,
                num_hidden_layers=2,
                num_attention_heads=8,
                intermediate_size=96,
                num_experts=8,
            )
        )


def test_the_pipeline_names_the_qk_norm_stage_before_rope(pair):
    from explorer import views

    _, run = pair
    assert "QK-norm → RoPE → Q·Kᵀ" in views.pipeline(run, 1, 0).layout["title"]["text"]


def test_the_pipeline_draws_each_positions_norm_before_and_after_qk_norm(pair):
    from explorer import views
    from tests.test_figures import assert_valid_as_sent

    _, run = pair
    plot = views.pipeline(run, 1, 3)
    assert_valid_as_sent(plot)
    fig = plot.figure()
    lines = {trace.name: trace for trace in fig.data if trace.type == "scatter" and trace.name}
    att, kv = run.attention(1), int(run.attention(1).kv_head[3])
    assert len(lines) == 4 and fig.data[4].type == "heatmap"  # the maps' traces come first, as always
    torch.testing.assert_close(
        torch.tensor(lines["‖q‖ after QK-norm"].x), att.q_normed[3].norm(dim=-1), atol=1e-6, rtol=0
    )
    torch.testing.assert_close(
        torch.tensor(lines["‖k‖ projected"].x), att.k[kv].norm(dim=-1), atol=1e-6, rtol=0
    )
    assert fig.layout.xaxis6.matches is None and fig.layout.yaxis6.matches == "y"  # rows: the maps' queries

"""The eager rerun reproduces the SDPA fast path, and our model reproduces Hugging Face transformers."""

from __future__ import annotations

import pytest
import torch

import explorer
from tests.conftest import HF_CONFIGS, PROMPT, make_hf_checkpoint, maps_tolerance


def test_eager_matches_sdpa_every_layer(gqa_checkpoint):
    ex = explorer.load(gqa_checkpoint, device="cpu")
    assert (ex.config.n_heads, ex.config.n_kv_heads) == (8, 2)
    fast_outputs = {}
    hooks = [
        block.self_attn.register_forward_hook(
            lambda module, args, out, i=i: fast_outputs.__setitem__(i, out[0].clone())
        )
        for i, block in enumerate(ex.model.layers)
    ]
    try:
        run = ex.run(PROMPT)
    finally:
        for hook in hooks:
            hook.remove()
    assert len(fast_outputs) == ex.config.n_layers
    for layer in range(ex.config.n_layers):
        eager = run.attention(layer).output
        assert eager.shape == (run.n_tokens, ex.config.hidden_size)
        assert (eager - fast_outputs[layer]).abs().max().item() <= 1e-5
        assert (eager - run.sdpa_output(layer)).abs().max().item() <= 1e-5


@pytest.fixture(scope="module", params=sorted(HF_CONFIGS))
def hf_pair(request, tmp_path_factory, tiny_tokenizer):
    model_type, overrides = HF_CONFIGS[request.param]
    directory = tmp_path_factory.mktemp(request.param)
    hf_model = make_hf_checkpoint(directory, tiny_tokenizer, model_type, **overrides)
    return hf_model, explorer.load(directory, device="cpu")


def test_logits_match_transformers(hf_pair):
    hf_model, ex = hf_pair
    run = ex.run(PROMPT)
    with torch.no_grad():
        hf_logits = hf_model(torch.tensor([run.ids])).logits[0]
    assert run.logits.shape == hf_logits.shape
    assert (run.logits - hf_logits).abs().max().item() <= 1e-4
    assert run.logits.argmax(-1).tolist() == hf_logits.argmax(-1).tolist()


def test_probs_match_transformers_eager_attentions_every_layer(hf_pair):
    hf_model, ex = hf_pair
    run = ex.run(PROMPT)
    with torch.no_grad():
        hf_maps = hf_model(torch.tensor([run.ids]), output_attentions=True).attentions
    assert len(hf_maps) == ex.config.n_layers
    for layer, hf_probs in enumerate(hf_maps):
        probs = run.attention(layer).probs
        assert probs.shape == hf_probs[0].shape
        assert (probs - hf_probs[0]).abs().max().item() <= maps_tolerance(run.attention(layer))
        # The maps must carry position: far from uniform, so a wrong RoPE or mask cannot hide.
        uniform = run.attention(layer).mask.float() / torch.arange(1, run.n_tokens + 1)[:, None]
        assert (probs - uniform).abs().max().item() > 0.1


def test_sharded_checkpoint_loads_like_single_file(tmp_path, tiny_tokenizer):
    single, sharded = tmp_path / "single", tmp_path / "sharded"
    make_hf_checkpoint(single, tiny_tokenizer, "llama", seed=3)
    make_hf_checkpoint(sharded, tiny_tokenizer, "llama", seed=3, max_shard_size="40KB")
    assert (sharded / "model.safetensors.index.json").is_file()
    a, b = explorer.load(single, device="cpu").run(PROMPT), explorer.load(sharded, device="cpu").run(PROMPT)
    assert torch.equal(a.logits, b.logits)

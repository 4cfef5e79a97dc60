"""The engine's contract: shapes, attention invariants, GQA map, laziness, and clear errors."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch
from huggingface_hub.hf_api import RepoSibling

import explorer
from explorer import CheckpointError, ModelConfig, PromptError, UnsupportedConfigError
from explorer.loading import hub
from tests.conftest import PROMPT, TokenizerSpy


@pytest.fixture(scope="module")
def ex(gqa_checkpoint):
    return explorer.load(gqa_checkpoint, device="cpu")


@pytest.fixture(scope="module")
def run(ex):
    return ex.run(PROMPT)


def test_internals_have_the_documented_shapes(ex, run):
    c, n = ex.config, run.n_tokens
    att = run.attention(1)
    H, Hkv, d = c.n_heads, c.n_kv_heads, c.head_dim
    assert len(run.tokens) == len(run.ids) == n and run.logits.shape == (n, c.vocab_size)
    assert att.q.shape == att.q_rot.shape == (H, n, d)
    assert att.k.shape == att.k_rot.shape == att.v.shape == (Hkv, n, d)
    assert att.angles.shape == (n, d // 2)
    for stage in (att.scores, att.scaled, att.masked, att.probs):
        assert stage.shape == (H, n, n) and stage.dtype == torch.float32 and stage.device.type == "cpu"
    assert att.mask.shape == (n, n) and att.mask.dtype == torch.bool
    assert att.output.shape == (n, c.hidden_size)


def test_stages_follow_one_another(run):
    att = run.attention(2)
    torch.testing.assert_close(att.scaled, att.scores * att.scale)
    assert att.scale == pytest.approx(att.q.shape[-1] ** -0.5)
    assert torch.isneginf(att.masked[:, ~att.mask]).all()
    assert torch.equal(att.masked[:, att.mask], att.scaled[:, att.mask])
    torch.testing.assert_close(att.probs, att.masked.softmax(-1), rtol=0, atol=1e-6)
    for head in (0, 5):
        stages = att.head_stages(head)
        for name in ("scores", "scaled", "masked", "probs"):
            assert torch.equal(stages[name], getattr(att, name)[head])


def test_probs_rows_sum_to_one_and_masked_entries_are_zero(run):
    att = run.attention(0)
    torch.testing.assert_close(att.probs.sum(-1), torch.ones(att.probs.shape[:2]))
    assert (att.probs[:, ~att.mask] == 0).all()
    assert torch.equal(att.mask, torch.ones_like(att.mask).tril())


def test_kv_head_is_query_head_over_group_size(ex, run):
    att = run.attention(0)
    H, Hkv = ex.config.n_heads, ex.config.n_kv_heads
    assert att.kv_head.tolist() == [h // (H // Hkv) for h in range(H)] == [0, 0, 0, 0, 1, 1, 1, 1]
    with pytest.raises(ValueError):
        explorer.kv_head_map(6, 4)


def test_angles_are_positions_times_inverse_frequencies(run):
    att = run.attention(0)
    assert torch.equal(att.angles, torch.arange(run.n_tokens)[:, None].float() * att.inv_freq[None])
    torch.testing.assert_close(att.q_rot.norm(dim=-1), att.q.norm(dim=-1))


def test_a_run_computes_nothing_quadratic_until_a_layer_is_asked(ex):
    fresh = ex.run(PROMPT)
    c, n = ex.config, fresh.n_tokens
    assert fresh.cache_nbytes() == (c.n_layers + 1) * n * c.hidden_size * 4
    assert "logits" not in vars(fresh)
    fresh.attention(3)
    assert list(fresh._eager) == [3]
    assert fresh.attention(3) is fresh.attention(3)


def test_layer_switch_does_not_run_the_model_again(ex):
    before = ex.forward_count
    fresh = ex.run(PROMPT)
    for layer in range(ex.config.n_layers):
        fresh.attention(layer)
    assert ex.forward_count == before + 1


def test_eager_cache_is_bounded_by_bytes_even_for_its_first_layer(ex):
    fresh = ex.run(PROMPT)
    one_layer = fresh.cache_nbytes()
    fresh.attention(0)
    one_layer = fresh.cache_nbytes() - one_layer
    fresh.eager_cache_bytes = one_layer
    fresh.attention(1)
    assert list(fresh._eager) == [1]
    fresh.eager_cache_bytes = one_layer - 1  # a layer bigger than the whole budget is not kept
    assert fresh.attention(2).layer == 2 and list(fresh._eager) == []
    assert fresh.cached_eager_bytes <= fresh.eager_cache_bytes


@pytest.mark.parametrize("layer", [-1, 4, 100, 1.0])
def test_out_of_range_layer_is_a_clear_value_error(run, layer):
    with pytest.raises(ValueError, match=r"layer must be an integer in \[0, 3\]"):
        run.attention(layer)


@pytest.mark.parametrize("prompt", ["", "   \n\t"])
def test_empty_prompt_is_a_clear_error(ex, prompt):
    with pytest.raises(PromptError, match="empty"):
        ex.run(prompt)


def test_long_prompt_is_truncated_to_the_context(ex):
    run = ex.run("to be or not " * 200)
    assert run.n_tokens == ex.config.context_length == 256
    assert run.truncated and run.n_dropped > 0
    assert ex.run(PROMPT, max_tokens=5).n_tokens == 5


def test_a_50_mb_prompt_is_cut_before_the_tokenizer_reads_it(ex, monkeypatch):
    text = "To be, or not to be, that is the question. " * (50_000_000 // 44)
    spy = TokenizerSpy(ex.tokenizer)
    monkeypatch.setattr(ex, "tokenizer", spy)
    run = ex.run(text, max_tokens=64)
    assert spy.lengths == [64 * 16]  # the tokenizer never saw the rest of the 50 MB
    assert run.n_tokens == 64 and run.truncated
    assert run.n_chars_dropped == len(text) - 64 * 16  # 16 characters per token allowed were read
    assert ex.run(text[:500], max_tokens=64).n_chars_dropped == 0  # a prompt within the budget is whole


def test_a_lone_surrogate_in_a_prompt_is_a_clear_error(ex):
    with pytest.raises(PromptError, match=r"lone surrogate \(U\+D83D, character 3\)"):
        ex.run("abc\ud83d and the rest")


def test_unicode_tokens_display_as_characters_never_as_escaped_bytes(run):
    shown = "".join(run.tokens)
    assert "\ufffd" not in shown and "\\x" not in shown
    assert "caf" in shown and "☕" in shown and "🙂" in shown
    assert shown.startswith("To be, or not to be")


def test_a_run_keeps_no_vocabulary_sized_tensor_whatever_reads_its_logits(ex):
    """`run.logits` is [N, vocab], computed when read and never kept (2 GiB for Gemma 3 at 2,048
    tokens); the views read the positions they show. After every reading of logits the app makes, the
    run holds what it held after its forward."""
    from explorer import views

    fresh = ex.run(PROMPT)
    held, vocab = fresh.cache_nbytes(), ex.config.vocab_size
    logits = fresh.logits
    assert logits.shape == (fresh.n_tokens, vocab) and logits.dtype == torch.float32
    torch.testing.assert_close(fresh.logits_at(-1), logits[-1])  # float32 within one product's rounding
    torch.testing.assert_close(fresh.logits_at([0, 3]), logits[[0, 3]])
    torch.testing.assert_close(fresh.next_token_probs(), logits[-1].softmax(-1), rtol=1e-6, atol=1e-7)
    assert views.default_target(fresh, 3) == int(logits[3].argmax())
    views.lens_grid(fresh)
    views.target_rank(fresh, views.default_target(fresh))
    views.attribution(fresh, views.default_target(fresh))
    fresh.top_next_tokens()

    def vocabulary_sized(value) -> bool:
        if isinstance(value, torch.Tensor):
            return vocab in value.shape
        if isinstance(value, dict):
            return any(vocabulary_sized(v) for v in value.values())
        return isinstance(value, list | tuple) and any(vocabulary_sized(v) for v in value)

    assert not [name for name, value in vars(fresh).items() if vocabulary_sized(value)]
    assert fresh.cache_nbytes() == held


def test_top_next_tokens_are_a_distribution(run):
    top = run.top_next_tokens(5)
    probs = [p for _, p in top]
    assert len(top) == 5 and probs == sorted(probs, reverse=True) and 0 < sum(probs) <= 1 + 1e-6


def test_config_validation_names_the_problem():
    with pytest.raises(ValueError, match="multiple of n_kv_heads"):
        ModelConfig(vocab_size=10, hidden_size=96, n_layers=1, n_heads=6, n_kv_heads=4, intermediate_size=8)
    with pytest.raises(ValueError, match="not divisible"):
        ModelConfig(vocab_size=10, hidden_size=60, n_layers=1, n_heads=8, n_kv_heads=2, intermediate_size=8)
    with pytest.raises(ValueError, match="n_layers must be positive"):
        ModelConfig(vocab_size=10, hidden_size=64, n_layers=0, n_heads=8, n_kv_heads=2, intermediate_size=8)


HF = dict(vocab_size=10, hidden_size=64, num_hidden_layers=1, num_attention_heads=8, intermediate_size=8)


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(model_type="gpt2"), "model_type 'gpt2' is not supported"),
        (
            dict(model_type="llama", rope_scaling=dict(rope_type="yarn", factor=4.0)),
            "'yarn' is not supported",
        ),
        (dict(model_type="llama", rope_parameters=dict(rope_type="dynamic", factor=2.0)), "'dynamic'"),
        (dict(model_type="llama", hidden_act="gelu"), "hidden_act 'gelu'"),
    ],
)
def test_unsupported_features_are_refused_by_name(overrides, message):
    with pytest.raises(UnsupportedConfigError, match=message):
        ModelConfig.from_hf_config({**HF, **overrides})


def test_hf_config_fields_map_to_ours():
    qwen = ModelConfig.from_hf_config({**HF, "model_type": "qwen2", "num_key_value_heads": 2})
    assert (qwen.qkv_bias, qwen.o_bias, qwen.n_kv_heads, qwen.group_size) == (True, False, 2, 4)
    mistral = ModelConfig.from_hf_config(
        {**HF, "model_type": "mistral", "sliding_window": 512, "max_position_embeddings": 4096}
    )
    assert mistral.context_length == 512  # exact within the window: capped there
    legacy = ModelConfig.from_hf_config(
        {**HF, "model_type": "llama", "rope_theta": 5e5, "rope_scaling": {"type": "linear", "factor": 2.0}}
    )
    assert legacy.rope_theta == 5e5 and legacy.rope_scaling.rope_type == "linear"


def test_pickled_only_checkpoint_is_refused_without_unpickling(tmp_path, gqa_checkpoint):
    (tmp_path / "config.json").write_text((gqa_checkpoint / "config.json").read_text())
    (tmp_path / "pytorch_model.bin").write_bytes(b"not even read")
    with pytest.raises(CheckpointError, match="pickled weights .*refused"):
        explorer.load(tmp_path)


def test_missing_directory_and_unreachable_hub_give_one_clear_error(tmp_path, monkeypatch):
    with pytest.raises(CheckpointError, match="No directory"):
        explorer.load(str(tmp_path / "nope"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    with pytest.raises(CheckpointError, match="cannot be reached|offline|No model"):
        explorer.load("attention-explorer-tests/no-such-model")


def test_unsupported_checkpoint_config_is_a_checkpoint_error(tmp_path, gqa_checkpoint):
    config = json.loads((gqa_checkpoint / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "model_type": "gpt_neox"}))
    with pytest.raises(CheckpointError, match="model_type 'gpt_neox' is not supported"):
        explorer.load(tmp_path)


def test_weights_that_do_not_fit_the_config_are_refused(tmp_path, gqa_checkpoint):
    config = json.loads((gqa_checkpoint / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 5}))
    (tmp_path / "model.safetensors").write_bytes((gqa_checkpoint / "model.safetensors").read_bytes())
    (tmp_path / "tokenizer.json").write_text((gqa_checkpoint / "tokenizer.json").read_text())
    with pytest.raises(CheckpointError, match="missing .*layers.4"):
        explorer.load(tmp_path)


def hub_listing(**sizes: int) -> SimpleNamespace:
    """What `HfApi.model_info(files_metadata=True)` answers: files and their sizes in bytes."""
    return SimpleNamespace(siblings=[RepoSibling(name, size=size) for name, size in sizes.items()])


def test_a_hub_model_too_big_to_serve_is_refused_before_any_download(monkeypatch):
    import huggingface_hub

    listing = hub_listing(**{"config.json": 700, "tokenizer.json": 2_000_000, "pytorch_model.bin": 9e9})
    listing.siblings += [RepoSibling(f"model-0000{i}-of-00003.safetensors", size=2.5e9) for i in (1, 2, 3)]
    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", lambda self, repo_id, **kw: listing)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", pytest.fail)
    with pytest.raises(CheckpointError, match=r"^big-org/huge is 7\.5 GB to download, above .* of 5 GB"):
        explorer.load("big-org/huge")  # the 9 GB pickle is not counted: it is never downloaded
    monkeypatch.setenv(hub.MAX_DOWNLOAD_GB_VARIABLE, "a lot")
    with pytest.raises(CheckpointError, match="not a number"):
        explorer.load("big-org/huge")


def test_a_hub_model_within_the_limit_is_downloaded_and_loaded(monkeypatch, gqa_checkpoint):
    import huggingface_hub

    size = (gqa_checkpoint / "model.safetensors").stat().st_size
    listing = hub_listing(**{"config.json": 700, "model.safetensors": size})
    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", lambda self, repo_id, **kw: listing)
    asked = []
    monkeypatch.setattr(
        huggingface_hub, "snapshot_download", lambda repo_id, **kw: asked.append(kw) or str(gqa_checkpoint)
    )
    monkeypatch.setenv(hub.MAX_DOWNLOAD_GB_VARIABLE, str(size * 1.01 / 1e9))
    ex = explorer.load("small-org/tiny", device="cpu")
    assert ex.config.n_kv_heads < ex.config.n_heads
    assert asked == [{"allow_patterns": hub.HUB_FILES}]

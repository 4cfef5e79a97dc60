"""Gemma 3 (text): sliding and full layers, each kind with its own RoPE base, a window far shorter than
the prompt, query_pre_attn_scalar, (1 + w) norms four a block, embeddings × √hidden and GeGLU. The
logits and every layer's maps are held against transformers with the other families
(tests/test_parity.py), greedy generation and its attention rows in tests/test_generate.py, every tap in
tests/test_taps.py; here, what a sliding layer is."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import explorer
from explorer import UnsupportedConfigError, figures, views
from explorer.engine import rope
from explorer.engine.config import ModelConfig
from explorer.views import attention as view_attention
from explorer.views import pooled
from tests.conftest import HF_CONFIGS, PROMPT, TEXT, make_hf_checkpoint

SLIDING, FULL = 0, 1  # the layers of HF_CONFIGS["gemma3-sliding"]: sliding, full, sliding
WINDOW = 5


@pytest.fixture(scope="module")
def pair(tmp_path_factory, tiny_tokenizer):
    model_type, overrides = HF_CONFIGS["gemma3-sliding"]
    directory = tmp_path_factory.mktemp("gemma3")
    hf_model = make_hf_checkpoint(directory, tiny_tokenizer, model_type, **overrides)
    return hf_model, explorer.load(directory, device="cpu").run(PROMPT)


def test_the_config_reads_each_layers_kind_window_rope_base_and_scale(pair):
    _, run = pair
    config = run.config
    assert config.layer_types == ("sliding_attention", "full_attention", "sliding_attention")
    assert [config.window(layer) for layer in range(3)] == [WINDOW, None, WINDOW]
    assert config.attention_scale == 24**-0.5 != config.head_dim**-0.5
    assert config.embedding_scale == math.sqrt(config.hidden_size) and config.norm_offset == 1.0
    local = rope.inverse_frequencies(config.head_dim, 100.0)
    torch.testing.assert_close(run.projections(SLIDING).inv_freq, local, atol=0, rtol=0)
    full = rope.inverse_frequencies(config.head_dim, 10000.0) / 2.0  # linear scaling, factor 2
    torch.testing.assert_close(run.projections(FULL).inv_freq, full, atol=0, rtol=0)


def test_a_sliding_layers_maps_are_exactly_0_beyond_its_window(pair):
    _, run = pair
    assert run.n_tokens > 4 * WINDOW
    i, j = torch.meshgrid(torch.arange(run.n_tokens), torch.arange(run.n_tokens), indexing="ij")
    outside = j <= i - WINDOW  # [N, N]: keys a window or more back
    for layer in (SLIDING, 2):
        att = run.attention(layer)
        assert torch.equal(att.mask, (j <= i) & ~outside)
        assert torch.all(att.probs[:, outside] == 0)  # exactly 0, every head
        assert torch.all(att.probs[:, (j <= i) & ~outside] > 0)
        torch.testing.assert_close(att.probs.sum(-1), torch.ones(att.probs.shape[:2]))
        assert torch.all(att.masked[:, outside] == -math.inf)
    full = run.attention(FULL)
    assert torch.all(full.probs[:, outside] > 0)  # the full layer sees every key up to the query


def test_the_eager_rerun_reproduces_the_sdpa_path_in_every_layer(pair):
    _, run = pair
    for layer in range(run.config.n_layers):
        assert (run.attention(layer).output - run.sdpa_output(layer)).abs().max().item() <= 1e-5


def test_the_heads_looking_at_a_token_get_no_weight_from_past_the_window(pair):
    _, run = pair
    weights = run.attention_to(key=0)  # [L, H] from the last position
    assert torch.all(weights[SLIDING] == 0) and torch.all(weights[2] == 0) and torch.all(weights[FULL] > 0)
    torch.testing.assert_close(weights[FULL], run.attention(FULL).probs[:, -1, 0], atol=1e-6, rtol=0)


def test_the_lens_ends_at_the_logits_and_the_attribution_sums_through_the_norms_after_attention(pair):
    _, run = pair
    lens = run.logit_lens(positions=[-1])
    torch.testing.assert_close(lens.logits(run.config.n_layers), run.logits[-1:], atol=1e-4, rtol=0)
    answer = int(run.logits[-1].argmax())
    a = run.logit_attribution(answer)
    parts = a.embedding + a.heads.sum() + a.mlps.sum() + a.biases.sum()
    assert abs(float(parts) - a.total) <= 1e-4 * max(1.0, abs(a.total))
    assert a.total == pytest.approx(float(run.logits[-1, answer]), abs=1e-4)


def test_the_pipeline_names_and_hatches_the_sliding_window(pair):
    _, run = pair
    title = views.pipeline(run, SLIDING, 0).figure().layout.title.text
    assert f"→ ×1/√24 → sliding-window mask ({WINDOW} keys) →" in title  # query_pre_attn_scalar, not d = 16
    assert "causal mask" in views.pipeline(run, FULL, 0).figure().layout.title.text
    hover = [t.text for t in views.pipeline(run, SLIDING, 0).figure().data if t.type == "scatter" and t.fill]
    assert sum("outside this sliding layer's window" in text for text in hover) == 2  # mask and masked


def window_edges(figure) -> list:
    return [t for t in figure.data if t.type == "scatter" and t.line.dash == "dash"]


def test_titles_say_which_layers_are_sliding_and_which_global(pair):
    _, run = pair
    assert (
        views.pipeline(run, SLIDING, 0)
        .figure()
        .layout.title.text.startswith(f"Layer 0 (sliding, {WINDOW} keys) · head 0")
    )
    assert (
        views.pipeline(run, FULL, 0)
        .figure()
        .layout.title.text.startswith("Layer 1 (global) · head 0 · kv 0: ")
    )
    assert views.all_heads(run, FULL).figure().layout.title.text.startswith("Layer 1 (global): every head's")
    assert (
        views.zoom(run, 2, 1, (0, 3, 0, 3))
        .figure()
        .layout.title.text.startswith(f"Layer 2 (sliding, {WINDOW} keys)")
    )


def test_a_sliding_layers_window_edge_is_drawn_where_its_weights_stop(pair):
    """A dashed line between key i − W and key i − W + 1 of every query i, over the softmax panel and
    every head's map: the maps are exactly 0 left of it, and it is the line x = y − W + 0.5."""
    _, run = pair
    n = run.n_tokens
    (edge,) = window_edges(views.pipeline(run, SLIDING, 0).figure())
    assert (edge.xaxis, edge.yaxis) == ("x5", "y5")  # the softmax panel
    x, y = np.asarray(edge.x), np.asarray(edge.y)
    np.testing.assert_allclose(x, y - WINDOW + 0.5)
    assert (x[0], y[-1]) == (-0.5, n - 0.5)  # from the left edge of the map to its foot
    edges = window_edges(views.all_heads(run, SLIDING).figure())
    assert len(edges) == run.config.n_heads and len({(t.xaxis, t.yaxis) for t in edges}) == run.config.n_heads
    probs = run.attention(SLIDING).probs
    for i in range(WINDOW, n):  # left of the line (keys 0 .. i − W) nothing, right of it weight
        assert torch.all(probs[:, i, : i - WINDOW + 1] == 0) and torch.all(probs[:, i, i - WINDOW + 1] > 0)
    assert not window_edges(views.pipeline(run, FULL, 0).figure()) and not window_edges(
        views.all_heads(run, FULL).figure()
    )


def test_the_overview_outlines_and_names_the_global_layers(pair):
    _, run = pair
    profile = views.head_profile(run)
    figure = views.overview(run, profile).figure()
    assert (
        "global layers (every earlier key) outlined: 1; the others slide over 5 keys"
        in figure.layout.title.text
    )
    assert figure.layout.yaxis.labelalias == {"1": "<b>1</b>"}
    assert figure.layout.yaxis2.labelalias == {"1": "<b>1</b>"}
    outlined = {(shape.yref, shape.y0, shape.y1) for shape in figure.layout.shapes}
    assert outlined == {(f"y{'' if i == 1 else i}", 0.5, 1.5) for i in range(1, 6)}


def test_gemma3_with_a_vision_tower_and_attention_soft_capping_are_refused_by_name():
    text = dict(
        vocab_size=320, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=96
    )
    with pytest.raises(UnsupportedConfigError, match="vision tower"):
        ModelConfig.from_hf_config(dict(model_type="gemma3", text_config=text))
    with pytest.raises(UnsupportedConfigError, match="soft-capping"):
        ModelConfig.from_hf_config(dict(model_type="gemma3_text", attn_logit_softcapping=50.0, **text))


def test_a_long_prompts_pooled_sliding_stages_are_its_whole_maps_pooled(
    tmp_path, tiny_tokenizer, monkeypatch
):
    """Past 512 tokens a sliding layer's stages come a block of queries at a time, the band's bounds taken
    from each block's scores: the same codes as its whole maps pooled."""
    model_type, overrides = HF_CONFIGS["gemma3-sliding"]
    make_hf_checkpoint(
        tmp_path,
        tiny_tokenizer,
        model_type,
        **{**overrides, "sliding_window": 40},
        max_position_embeddings=1024,
    )
    monkeypatch.setattr(view_attention, "VIEW_MAP_BYTES", 64 << 20)  # whole maps for the reference
    run = explorer.load(tmp_path, device="cpu").run(TEXT * 6, max_tokens=701)
    assert run.n_tokens == 701 and run.config.window(SLIDING) == 40
    whole = views.pipeline(run, SLIDING, 3).figure()
    stages, mask = pooled.head_stages(run, SLIDING, 3, 8 * 701 * 4 * 10)
    blocked = figures.pipeline_figure(
        run.tokens,
        *(stages[name] for name in ("scores", "scaled")),
        mask,
        stages["masked"],
        stages["probs"],
        run.projections(SLIDING).scale,
        whole.layout.title.text,
        window=40,
    )
    assert stages["scores"].block > 1
    heatmaps = [[np.asarray(t.z) for t in figure.data if t.type == "heatmap"] for figure in (whole, blocked)]
    assert len(heatmaps[0]) == 5
    for a, b in zip(*heatmaps, strict=True):
        np.testing.assert_array_equal(b, a)


def test_a_sliding_layers_zoom_block_by_block_masks_the_band_as_the_eager_rerun(pair, monkeypatch):
    """The zoom past the view budget reads a head's rows a block of queries at a time: the same −∞ cells
    (the band, not only the causal triangle) and the same values as the whole layer's eager stages."""
    from explorer.engine import blockwise

    _, run = pair
    att, p = run.attention(SLIDING), run.projections(SLIDING)
    for start, stop in [(0, run.n_tokens), (7, 19)]:
        rows = blockwise.head_rows(p, 3, start, stop)
        eager = att.head_stages(3)
        assert torch.equal(rows["masked"].isinf(), eager["masked"][start:stop].isinf())
        for name in ("scores", "masked", "probs"):
            torch.testing.assert_close(rows[name], eager[name][start:stop], atol=1e-6, rtol=0)
    window = (10, run.n_tokens - 1, 0, run.n_tokens - 1)
    whole = views.zoom(run, SLIDING, 3, window).figure()
    monkeypatch.setattr(view_attention, "VIEW_MAP_BYTES", 1000)  # the zoom goes block by block
    assert not views.maps_fit(run)
    blocked = views.zoom(run, SLIDING, 3, window).figure()
    for a, b in zip(whole.data, blocked.data, strict=True):
        if getattr(a, "z", None) is not None:
            np.testing.assert_allclose(np.asarray(b.z, dtype=float), np.asarray(a.z, dtype=float), atol=1e-6)


def test_a_gemma3_gguf_file_gives_transformers_logits_and_maps(tmp_path, tiny_tokenizer):
    """Written as llama.cpp writes Gemma 3 (norms stored as 1 + w, not permuted, the sliding pattern of six
    and the local base of 10,000 assumed, queries scaled by 1/√head_dim: head_dim 256 is the 256 of
    transformers' query_pre_attn_scalar default), and read by transformers as well as by us."""
    from tests.gguf_files import write_gguf
    from tests.test_gguf import hf_from_gguf, hf_outputs

    source = make_hf_checkpoint(
        tmp_path,
        tiny_tokenizer,
        "gemma3_text",
        num_hidden_layers=7,
        head_dim=256,
        sliding_window=6,
        query_pre_attn_scalar=256,
        rope_parameters={
            "sliding_attention": dict(rope_type="default", rope_theta=10000.0),
            "full_attention": dict(rope_type="default", rope_theta=1e6),
        },
    )
    path = write_gguf(tmp_path / "gemma3.gguf", source, tiny_tokenizer, "gemma3", {"attn": "Q8_0"})
    ex = explorer.load(path, device="cpu")
    assert ex.config.model_type == "gemma3_text" and ex.config.window(5) is None and ex.config.window(6) == 6
    run = ex.run(PROMPT)
    hf_model, _ = hf_from_gguf(path)
    out = hf_outputs(hf_model, run.ids)
    assert (run.logits - out.logits[0]).abs().max().item() <= 1e-4
    for layer, hf_probs in enumerate(out.attentions):
        assert (run.attention(layer).probs - hf_probs[0]).abs().max().item() <= 1e-5
    assert out.logits[0].std() > 0.1


def test_the_rope_view_draws_each_kind_of_layers_own_base(pair):
    _, run = pair
    lines = [t for t in views.rope_wavelengths(run).figure().data if t.mode == "markers+lines"]
    assert [t.name for t in lines] == ["full layers (base 10,000)", "sliding layers (base 100)"]
    for line, layer in zip(lines, (FULL, SLIDING), strict=True):
        expected = rope.wavelengths(run.projections(layer).inv_freq).numpy()
        np.testing.assert_allclose(np.asarray(line.y), expected, rtol=1e-6)


def test_flow_splits_what_the_heads_wrote_through_the_norm_after_attention(pair):
    """Each head's part from each key, times the norm's scale frozen at the real output, plus o_proj's
    input kept whole: together they are what the attention added to the stream."""
    from explorer.engine import flow

    _, run = pair
    for layer in range(run.config.n_layers):
        p = run.projections(layer)
        at = flow._layer(run, p, run.n_tokens)
        alpha = flow._weights(run, p, list(range(run.n_tokens)), run.n_tokens)  # [N, H, N]
        written = flow.attention_parts(alpha, at.writes, at.write_scales).sum((1, 2))  # [N, hidden]
        torch.testing.assert_close(written, at.after_attention - at.block_input, atol=1e-4, rtol=1e-4)
    graph = run.information_flow(threshold=0.04)
    assert graph.edges and {edge.kind for edge in graph.edges} >= {"attention", "residual"}
    shares = run.contributions(FULL)
    total = shares.heads.sum() + shares.residual
    assert float(total) == pytest.approx(1.0, abs=1e-5)

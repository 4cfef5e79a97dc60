"""The Attention tab's softmax maps weighted by what each key writes (Kobayashi et al. 2020): each row of
‖α·v·W_O‖ (`AttentionInternals.weighted_norms`) over its sum, in the pipeline's softmax panel, every
head's grid and the zoom, whole or pooled past the budgets; hover gives α and ‖α·v·W_O‖; links carry it."""

from __future__ import annotations

import json
import math
from urllib.parse import parse_qs

import numpy as np
import pytest
from conftest import TEXT, make_hf_checkpoint
from test_figures import _decode, assert_valid_as_sent, decoded

import explorer
from explorer import views
from explorer.app import payload
from explorer.app.ui import share
from explorer.figures import codec
from explorer.figures.common import to_json
from explorer.views import attention as view_attention
from explorer.views import pooled

WEIGHTED = views.MapStyle(weighted=True)
PROMPT = "To be, or not to be: that is the question."
SOFTMAX = 4  # the pipeline's softmax panel, of its traces


@pytest.fixture(scope="module")
def run():
    return explorer.load(device="cpu").run(PROMPT)


def shares(att) -> np.ndarray:
    """Each row of ‖α·v·W_O‖ over its sum, from the engine's weighted norms.  # [H, N, N]"""
    norms = att.weighted_norms.double()
    return (norms / norms.sum(-1, keepdim=True)).numpy()


def test_the_softmax_panel_weighted_is_each_rows_weighted_norms_over_its_sum(run):
    layer, head = 2, 3
    fig = decoded(views.pipeline(run, layer, head, WEIGHTED))
    z = fig["data"][SOFTMAX]["z"]
    np.testing.assert_allclose(z, shares(run.attention(layer))[head], atol=1e-6, rtol=0)
    np.testing.assert_allclose(z.sum(-1), 1, atol=1e-6)
    assert not z[np.triu_indices(run.n_tokens, 1)].any()  # masked: exactly 0
    assert fig["layout"]["annotations"][SOFTMAX]["text"] == "α weighted by ‖v·W_O‖"
    assert "weighted by what each key writes" in fig["layout"]["title"]["text"]
    plain = decoded(views.pipeline(run, layer, head))["data"][SOFTMAX]["z"]
    np.testing.assert_array_equal(plain, run.attention(layer).probs[head].numpy())  # off: α as before


def test_hover_of_a_weighted_map_carries_the_attention_weight_and_the_norm(run):
    layer, head = 2, 3
    att = run.attention(layer)
    fig = views.pipeline(run, layer, head, views.MapStyle(log=True, weighted=True))
    trace = decoded(fig)["data"][SOFTMAX]
    alpha, written = trace["customdata"][..., 0], trace["customdata"][..., 1]
    np.testing.assert_array_equal(alpha, att.probs[head].numpy())
    np.testing.assert_allclose(written, att.weighted_norms[head].numpy(), rtol=1e-6, atol=0)
    assert "share = %{z:.4g}" in trace["hovertemplate"]
    assert "α = %{customdata[0]:.4g}" in trace["hovertemplate"]
    assert "‖α·v·W_O‖ = %{customdata[1]:.4g}" in trace["hovertemplate"]
    assert_valid_as_sent(fig)


def test_the_app_sends_a_weighted_maps_hover_as_a_rule_the_page_rebuilds(run):
    """The customdata stays out of the payload (3× the map's bytes); the page rebuilds it from the map
    and two vectors (explorer/app/ui/assets/page.js, `keyWrites`), to float32 rounding."""
    fig = views.pipeline(run, 2, 3, WEIGHTED)
    full = decoded(fig)["data"][SOFTMAX]
    sent = json.loads(payload.plot_payload(fig)["plot"])["data"][SOFTMAX]
    assert "customdata" not in sent and sent["meta"]["packed"] == {"op": "tril", "fill": 0.0}
    sums, norms = (_decode(sent["meta"]["weighted"][key]).astype(np.float64) for key in ("sums", "norms"))
    written = full["z"] * sums[:, None]  # as the page computes it, in doubles
    alpha = np.where(norms > 0, written / norms, 0)
    np.testing.assert_allclose(written, full["customdata"][..., 1], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(alpha, full["customdata"][..., 0], rtol=1e-6, atol=1e-7)


def test_every_heads_grid_and_the_zoom_follow_the_weighting(run):
    layer = 3
    expected = shares(run.attention(layer))
    grid = decoded(views.all_heads(run, layer, WEIGHTED))
    heatmaps = [t for t in grid["data"] if t["type"] == "heatmap"]
    assert len(heatmaps) == run.config.n_heads
    for h, trace in enumerate(heatmaps):
        np.testing.assert_allclose(trace["z"], expected[h], atol=1e-6, rtol=0)
        np.testing.assert_array_equal(trace["customdata"][..., 0], run.attention(layer).probs[h].numpy())
    assert "weighted by ‖v·W_O‖" in grid["layout"]["title"]["text"]
    # the zoom: each key's share of its whole row, not of the window's
    zoom = decoded(views.zoom(run, layer, 1, (4, 9, 0, 5), WEIGHTED))["data"][1]
    np.testing.assert_allclose(zoom["z"], expected[1][4:10, :6], atol=1e-6, rtol=0)
    assert zoom["z"].sum(-1).min() < 1 - 1e-3  # the window leaves keys out of later rows
    np.testing.assert_array_equal(zoom["customdata"][..., 0], run.attention(layer).probs[1, 4:10, :6].numpy())


@pytest.mark.parametrize("prompt", [PROMPT, "Now is the winter of our discontent made glorious summer"])
def test_the_first_tokens_share_drops_when_weighted_on_the_bundled_models_last_layer(run, prompt):
    """Layer 3's kv group 0 (heads 0-3) gives the first token much of its attention, but that token's
    value writes about a third as much through those heads as the others' do: weighted, its share
    falls by a fifth or more."""
    run = run.explorer.run(prompt)
    layer, heads = 3, slice(0, 4)
    att = run.attention(layer)
    norms = att.value_norms[heads]
    assert (norms[:, 0] < 0.5 * norms[:, 1:].mean(-1)).all()
    first = {}
    for style in (views.MapStyle(), WEIGHTED):
        maps = decoded(views.all_heads(run, layer, style))["data"][heads]
        first[style.weighted] = np.mean([m["z"][1:, 0].mean() for m in maps])  # queries after it
    assert first[False] > 0.25
    assert first[True] < 0.85 * first[False], first


@pytest.fixture(scope="module")
def long_ex(tmp_path_factory, tiny_tokenizer):
    """A seeded llama (8 query heads, 2 kv heads) with a 1,024-token context."""
    directory = tmp_path_factory.mktemp("llama-long-weighted")
    make_hf_checkpoint(directory, tiny_tokenizer, "llama", max_position_embeddings=1024)
    return explorer.load(directory, device="cpu")


LONG = TEXT * 6  # 702 tokens: the pipeline's maps and every head's are pooled
LAYER, HEAD = 1, 5


def softmax_maps(fig) -> list[np.ndarray]:
    """The codes of the softmax maps a figure draws (the pipeline's last panel, or every head's)."""
    maps = [t["z"] for t in decoded(fig)["data"] if t["type"] == "heatmap" and "share" in t["hovertemplate"]]
    assert maps
    return maps


def pooled_codes(maps: np.ndarray, block: int) -> np.ndarray:
    return np.rint(np.nan_to_num(codec.pool(maps, block, "max")) * 100).astype(np.uint8)


def test_pooled_maps_show_each_cells_largest_share(long_ex):
    run = long_ex.run(LONG)
    assert run.n_tokens == 702 and views.maps_fit(run)
    expected = shares(run.attention(LAYER)).astype(np.float32)
    (pipeline,) = softmax_maps(views.pipeline(run, LAYER, HEAD, WEIGHTED))
    block = codec.block_for(702, codec.MAP_BUDGET_BYTES)
    assert block > 1 and pipeline.dtype == np.uint8
    assert np.abs(pipeline.astype(int) - pooled_codes(expected[HEAD], block)).max() <= 1
    grid = softmax_maps(views.all_heads(run, LAYER, WEIGHTED))
    block = codec.block_for(702, codec.ALL_HEADS_BUDGET_BYTES // 8)
    assert np.abs(np.stack(grid).astype(int) - pooled_codes(expected, block)).max() <= 1
    fig = views.pipeline(run, LAYER, HEAD, WEIGHTED)
    assert "pooled into" in fig.layout["title"]["text"] and "weighted" in fig.layout["title"]["text"]


def test_past_the_view_budget_the_weighted_maps_are_pooled_block_by_block_as_the_whole_ones(
    long_ex, monkeypatch
):
    whole = long_ex.run(LONG)
    expected = [
        views.pipeline(whole, LAYER, HEAD, WEIGHTED),
        views.all_heads(whole, LAYER, WEIGHTED),
        views.zoom(whole, LAYER, HEAD, (500, 560, 0, 700), WEIGHTED),
    ]
    monkeypatch.setattr(view_attention, "VIEW_MAP_BYTES", 8 * 702 * 702 * 4 // 10)
    run = long_ex.run(LONG)
    monkeypatch.setattr(run, "attention", lambda *a, **k: pytest.fail("the whole layer was computed"))
    assert not views.maps_fit(run)
    plain = views.layer_figures(run, LAYER)  # the layer shown, then weighted: one more pass, kept
    kept = pooled.kept_layer_views(run, LAYER)
    assert kept.weighted_maps is None
    blocked = [
        views.pipeline(run, LAYER, HEAD, WEIGHTED),
        views.layer_figures(run, LAYER, WEIGHTED)[0],
        views.zoom(run, LAYER, HEAD, (500, 560, 0, 700), WEIGHTED),
    ]
    for a, b in zip(expected, blocked, strict=True):
        assert a.layout["title"]["text"] == b.layout["title"]["text"]
        for x, y in zip(softmax_maps(a), softmax_maps(b), strict=True):
            if x.dtype == np.uint8:  # codes: a row's sum over its keys or over those up to its block's end
                assert np.abs(x.astype(int) - y.astype(int)).max() <= 1 and (x == y).mean() > 0.999
            else:
                np.testing.assert_allclose(y, x, atol=1e-6)
    kept = pooled.kept_layer_views(run, LAYER)
    assert kept.weighted_maps is not None and kept.nbytes < 2 * 100_000  # both kinds of maps, coded
    monkeypatch.setattr(pooled, "layer_pass", lambda *a, **k: pytest.fail("the pass was computed again"))
    again = views.all_heads(run, LAYER, WEIGHTED)
    assert to_json(again) == to_json(blocked[1])
    assert to_json(views.all_heads(run, LAYER)) == to_json(plain[0])


@pytest.mark.parametrize("n_tokens", [64, 256, 512, 1024])
def test_a_weighted_update_stays_within_a_megabyte_and_near_the_plain_ones_size(long_ex, n_tokens):
    run = long_ex.run("To be, or not to be. " * 300, max_tokens=n_tokens)
    plain = payload.update_payload_bytes(run, LAYER, HEAD)
    weighted = payload.update_payload_bytes(run, LAYER, HEAD, WEIGHTED)
    assert weighted <= 1_000_000
    # the shares in place of α, and for each exact map (every head's pipeline while exact, and
    # thumbnail up to 64 tokens) two float32 vectors (11 base64 bytes a position) the page rebuilds
    # hover from
    n_heads = run.config.n_heads
    exact_maps = n_heads * views.pipeline_exact(run) + n_heads * (n_tokens <= 64)
    titles = 150 * n_heads  # each head's pipeline title names the weighting
    assert weighted - plain <= exact_maps * (11 * n_tokens + 300) + 1_000 + titles, (plain, weighted)


@pytest.mark.parametrize(
    "style",
    [views.MapStyle(weighted=True), views.MapStyle(log=True, weighted=True), views.MapStyle(log=True)],
)
def test_a_link_carries_how_maps_are_drawn_and_restores_it(style):
    query = share.query_string(share.ViewState(prompt="To be", layer=1, head=2, style=style))
    params = {key: values[0] for key, values in parse_qs(query[1:]).items()}
    assert ("weighted" in params) == style.weighted and ("log" in params) == style.log
    assert share.map_style(params) == style


def test_a_link_that_says_nothing_of_maps_leaves_them_as_they_are():
    query = share.query_string(share.ViewState(prompt="To be", layer=1, head=2))
    params = {key: values[0] for key, values in parse_qs(query[1:]).items()}
    assert "weighted" not in params and "log" not in params
    assert share.map_style(params) is None
    assert share.map_style({"weighted": "1"}) == views.MapStyle(log=False, weighted=True)


def test_the_share_of_a_row_whose_keys_write_nothing_is_zero():
    import torch

    from explorer.views.weighting import key_shares

    probs = torch.tensor([[1.0, 0.0], [0.25, 0.75]])
    shares_, sums = key_shares(probs, torch.tensor([0.0, 2.0]))
    torch.testing.assert_close(shares_, torch.tensor([[0.0, 0.0], [0.0, 1.0]]))
    torch.testing.assert_close(sums, torch.tensor([0.0, 1.5]))
    assert math.isfinite(float(shares_.sum()))

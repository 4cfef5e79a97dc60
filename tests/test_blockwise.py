"""Views of a layer whose [H, N, N] maps pass the view budget are computed a block of queries at a
time, never holding the whole maps, and show what the whole maps would have shown."""

from __future__ import annotations

import csv
import math

import numpy as np
import plotly.graph_objects as go
import pytest
import torch
from conftest import TEXT, make_hf_checkpoint

import explorer
from explorer import figures, views
from explorer.engine import attention, blockwise
from explorer.engine import rows as rows_module
from explorer.figures.common import to_json
from explorer.views import attention as view_attention
from explorer.views import export, pooled

LAYER, HEAD = 1, 5


@pytest.fixture(scope="module")
def long_checkpoint(tmp_path_factory, tiny_tokenizer):
    """A seeded llama (8 query heads, 2 kv heads) with a 1,024-token context."""
    directory = tmp_path_factory.mktemp("llama-long")
    make_hf_checkpoint(directory, tiny_tokenizer, "llama", max_position_embeddings=1024)
    return directory


@pytest.fixture(scope="module")
def ex(long_checkpoint):
    return explorer.load(long_checkpoint, device="cpu")


PROMPT = TEXT * 6  # 702 tokens: past 512, so the pipeline's maps are pooled


def every_view(run):
    return [
        views.pipeline(run, LAYER, HEAD),
        views.all_heads(run, LAYER),
        views.head_similarity(run, LAYER),
        views.zoom(run, LAYER, HEAD, (500, 560, 0, 700)),
        views.faithfulness(run, LAYER),
    ]


def heatmaps(figure: figures.Plot | go.Figure) -> list[np.ndarray]:
    plain = isinstance(figure, figures.Plot)
    maps = [trace.get("z") if plain else getattr(trace, "z", None) for trace in figure.data]
    return [np.asarray(z, dtype=float) for z in maps if z is not None]


@pytest.fixture(scope="module")
def whole(ex):
    """Every view, and the overview's scores, from the whole maps."""
    run = ex.run(PROMPT)
    assert views.maps_fit(run) and run.n_tokens == 702
    return every_view(run), views.head_profile(run)


@pytest.fixture(scope="module")
def blockwise_run(ex):
    """A run whose views must go block by block: the budget holds a tenth of a layer's maps, and
    `run.attention` (the whole maps) fails if called."""
    budget = view_attention.VIEW_MAP_BYTES
    view_attention.VIEW_MAP_BYTES = 8 * 702 * 702 * 4 // 10
    run = ex.run(PROMPT)
    run.attention = lambda *args, **kwargs: pytest.fail("the whole layer was computed")
    yield run
    view_attention.VIEW_MAP_BYTES = budget


def test_views_past_the_budget_show_what_the_whole_maps_show(whole, blockwise_run):
    assert not views.maps_fit(blockwise_run)
    for exact, blocked in zip(whole[0], every_view(blockwise_run), strict=True):
        assert exact.layout["title"]["text"] == blocked.layout["title"]["text"]
        for a, b in zip(heatmaps(exact), heatmaps(blocked), strict=True):
            assert a.shape == b.shape
            np.testing.assert_allclose(b, a, atol=2e-4)  # pooled codes equal; similarity to float32 sums
    for name, scores in whole[1].items():
        np.testing.assert_allclose(views.head_profile(blockwise_run)[name], scores, atol=1e-4, rtol=1e-5)


@pytest.mark.parametrize("n_tokens", [701, 1000])  # blocks of 2 and 3, the last cells cut by the end
def test_a_heads_pooled_stages_are_its_whole_maps_pooled(ex, n_tokens, monkeypatch):
    """From one product q·kᵀ per block and a softmax over the keys each block may see, the same
    codes as the whole maps pooled: scaled from the scores' bounds, masked from them and the diagonal."""
    monkeypatch.setattr(view_attention, "VIEW_MAP_BYTES", 64 << 20)  # whole maps (`blockwise_run` shrinks it)
    run = ex.run(PROMPT * 2, max_tokens=n_tokens)
    assert run.n_tokens == n_tokens and views.maps_fit(run)
    whole = views.pipeline(run, LAYER, HEAD)
    stages, mask = pooled.head_stages(run, LAYER, HEAD, 8 * n_tokens * 4 * 10)  # blocks of some 40 queries
    blocked = figures.pipeline_figure(
        run.tokens,
        *(stages[name] for name in ("scores", "scaled")),
        mask,
        stages["masked"],
        stages["probs"],
        run.projections(LAYER).scale,
        whole.layout["title"]["text"],
    )
    cells = math.ceil(n_tokens / stages["scores"].block)
    assert stages["scores"].block > 1 and stages["scores"].z.shape == (cells, cells)
    for a, b in zip(heatmaps(whole), heatmaps(blocked), strict=True):
        assert a.shape == b.shape
        np.testing.assert_array_equal(b, a)


def test_a_layer_shown_again_is_drawn_from_what_the_run_kept(ex, monkeypatch):
    """Past the budget a layer's pass is kept as its pooled codes, similarity and check (counted in
    the run's bytes, some KB): coming back to the layer computes no pass and no fast-path output."""
    monkeypatch.setattr(view_attention, "VIEW_MAP_BYTES", 8 * 702 * 702 * 4 // 10)
    run = ex.run(PROMPT)
    first = views.layer_figures(run, LAYER)
    kept = run.recalled(("layer views", LAYER)).nbytes
    assert 0 < kept < 100_000 and run.cache_nbytes() == run.cached_eager_bytes + kept + sum(
        t.numel() * t.element_size() for t in (run.layer_inputs, run.final_hidden)
    )
    monkeypatch.setattr(pooled, "layer_pass", lambda *a, **k: pytest.fail("the pass was computed again"))
    monkeypatch.setattr(run, "sdpa_output", lambda *a, **k: pytest.fail("the fast path was rerun"))
    again = [*views.layer_figures(run, LAYER), views.all_heads(run, LAYER), views.head_similarity(run, LAYER)]
    for a, b in zip([*first, *first[:2]], again, strict=True):
        assert to_json(a) == to_json(b)
    assert view_attention.eager_check(run, LAYER).max_abs_diff <= views.EAGER_TOLERANCE


def test_a_layer_prepared_ahead_is_drawn_with_no_pass_and_equal_to_one_drawn_cold(ex, monkeypatch):
    """`prepare_layer` keeps a layer's pass past the budget (the weighted maps too when the style asks),
    so its figures then compute nothing, and are what a cold switch draws; whole maps are left alone."""
    monkeypatch.setattr(view_attention, "VIEW_MAP_BYTES", 8 * 702 * 702 * 4 // 10)
    cold = views.layer_figures(ex.run(PROMPT), LAYER, figures.MapStyle(weighted=True))
    run = ex.run(PROMPT)
    assert views.prepare_layer(run, LAYER) and not views.prepare_layer(run, LAYER)  # once
    assert views.prepare_layer(run, LAYER, figures.MapStyle(weighted=True))  # its weighted maps added
    assert not views.prepare_layer(run, LAYER, figures.MapStyle(weighted=True))
    monkeypatch.setattr(pooled, "layer_pass", lambda *a, **k: pytest.fail("the pass was computed again"))
    monkeypatch.setattr(run, "sdpa_output", lambda *a, **k: pytest.fail("the fast path was rerun"))
    warm = views.layer_figures(run, LAYER, figures.MapStyle(weighted=True))
    for a, b in zip(warm[:2], cold[:2], strict=True):  # every head's map, their similarity (the check: timed)
        assert to_json(a) == to_json(b)
    with pytest.raises(ValueError, match="layer"):
        views.prepare_layer(run, run.config.n_layers)
    monkeypatch.undo()
    short = ex.run(TEXT)
    assert views.maps_fit(short) and not views.prepare_layer(short, LAYER)
    assert short.recalled(("layer views", LAYER)) is None


def test_no_block_of_maps_passes_the_budget(blockwise_run, monkeypatch):
    sizes = []
    made = attention.attention_rows

    def counted(*args, **kwargs):
        rows = made(*args, **kwargs)
        sizes.append(math.prod(rows.shape) * 4)
        return rows

    monkeypatch.setattr(attention, "attention_rows", counted)
    every_view(blockwise_run)
    views.head_profile(blockwise_run)
    whole_layer = 8 * 702 * 702 * 4
    assert sizes and max(sizes) <= view_attention.VIEW_MAP_BYTES // 4 < whole_layer // 10


def test_rows_by_blocks_are_the_eager_maps_bit_for_bit(ex):
    """A query's row is computed over the same keys in the same cell whoever asks for it: the rows of
    a layer a block at a time, and the output from them, are the whole layer's to the bit."""
    run = ex.run(PROMPT)
    p, whole = run.projections(LAYER), run.attention(LAYER)
    blocks = blockwise.query_blocks(702, 8, 10**6, multiple=rows_module.CELL)
    assert len(blocks) > 3
    rows = [p.rows(range(a, b)) for a, b in blocks]
    assert torch.equal(torch.cat([r.probs for r in rows], dim=1), whole.probs)  # [H, N, N]
    assert torch.equal(torch.cat([r.scores for r in rows], dim=1), whole.scores)
    output = blockwise.layer_pass(p, 10**6, ex.model.layers[LAYER].self_attn)[1]
    assert torch.equal(output, whole.output)


def test_rows_cut_at_the_last_query_leave_out_only_keys_of_probability_zero(ex):
    p = ex.run(PROMPT).projections(LAYER)
    for start, stop in [(0, 1), (100, 180), (650, 702)]:
        rows = p.rows(range(start, stop)).probs  # [H, R, N]
        causal = p.rows(range(start, stop), n_keys=stop).probs  # [H, R, stop]
        assert causal.shape == (8, stop - start, stop)
        assert not rows[..., stop:].any()
        torch.testing.assert_close(causal, rows[..., :stop], atol=1e-7, rtol=0)


def test_query_blocks_fit_the_budget_and_line_up_with_pooled_cells():
    blocks = blockwise.query_blocks(1000, 8, 8 * 1000 * 4 * 30, multiple=7)
    assert blocks[0] == (0, 28) and blocks[-1][1] == 1000
    assert all(a % 7 == 0 and b - a <= 28 for a, b in blocks)
    assert blockwise.query_blocks(1000, 8, 1, multiple=3)[0] == (0, 3)  # at least one cell


@pytest.mark.parametrize("shape", [(3, 5, 5), (2, 17, 33), (64, 2000), (1, 1, 1), (2, 3, 9, 3)])
@pytest.mark.parametrize("block", [1, 2, 8])
def test_a_gap_free_maps_torch_pooling_is_the_codecs(shape, block):
    maps = torch.rand(shape, generator=torch.Generator().manual_seed(block))  # [..., R, C] probs
    maps[..., ::3] = 0  # the zeros of keys no query sees
    expected = figures.codec.pool(maps.numpy(), block, "max")
    pooled_maps = pooled.pool_max(maps, block)
    assert pooled_maps.dtype == np.float32 and np.array_equal(pooled_maps, expected)
    strided = maps.transpose(-1, -2)  # not contiguous, as a block's rows cut at its last query are
    assert np.array_equal(pooled.pool_max(strided, block), figures.codec.pool(strided.numpy(), block, "max"))


@pytest.mark.parametrize("block", [1, 3, 25])
def test_rows_pooled_a_block_at_a_time_from_any_row_are_the_whole_maps_pooled(block):
    """Blocks of rows that start and stop inside a pooled cell, each cut at its last query's key,
    pool to the whole causal maps' cells."""
    n = 101
    maps = torch.rand(2, n, n, generator=torch.Generator().manual_seed(block)).tril()  # [H, N, N] probs
    expected = figures.codec.pool(maps.numpy(), block, "max")
    cells = math.ceil(n / block)
    pooled_maps = np.zeros((2, cells, cells), dtype=np.float32)
    for start, stop in [(0, 7), (7, 8), (8, 64), (64, 101)]:
        pooled.pool_rows(pooled_maps, maps[:, start:stop, :stop], start, block)
    assert np.array_equal(pooled_maps, expected)


def test_an_ablated_runs_output_block_by_block_is_its_eager_output(ex):
    """The heads' outputs are edited as the ablated run's forward edited them (a mean over every
    position, so not block by block): the output equals the eager layer's and the fast path's."""
    run = ex.run(TEXT, ablate=[(LAYER, 2), (LAYER, HEAD)], ablate_mode="mean")
    attn = ex.model.layers[LAYER].self_attn
    p, budget = run.projections(LAYER), 8 * run.n_tokens * 4 * 16  # blocks of 16 queries
    blocked = blockwise.layer_pass(p, budget, attn, heads_tap=run.heads_tap)[1]
    torch.testing.assert_close(blocked, run.attention(LAYER).output, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(blocked, run.sdpa_output(LAYER), atol=1e-5, rtol=1e-5)
    plain = blockwise.layer_pass(p, budget, attn)[1]
    assert (plain - blocked).abs().max() > 1e-3  # the edit matters: without it the output differs


def test_a_heads_csv_past_the_budget_is_written_block_by_block_and_equals_the_whole_map(
    blockwise_run, tmp_path
):
    budget = view_attention.VIEW_MAP_BYTES
    path = export.write_head_csv(blockwise_run, LAYER, HEAD, tmp_path / "head.csv", budget)
    with open(path, encoding="utf-8") as file:
        rows = list(csv.reader(file))[1:]
    probs = np.array([row[1:] for row in rows], dtype=np.float64)
    expected = blockwise_run.explorer.run(PROMPT).attention(LAYER).probs[HEAD].numpy()
    assert [row[0] for row in rows[:2]] == [f"0:{blockwise_run.tokens[0]}", f"1:{blockwise_run.tokens[1]}"]
    np.testing.assert_allclose(probs, expected, atol=1e-6)


def test_a_layers_export_size_is_known_before_it_is_computed(ex):
    run = ex.run(TEXT)
    att = run.attention(LAYER)
    assert export.layer_bytes(run) == sum(getattr(att, name).numel() * 4 for name in export.LAYER_FIELDS)

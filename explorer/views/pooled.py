"""A layer's views past the view budget: computed from its projections a block of queries at a time
(`explorer.engine.blockwise`) and pooled as the figures pool a whole map (`explorer.figures.codec`), so
they show what the whole maps would have shown, code for code.

    head_stages   one head's scores, scaled, masked and probs, pooled and coded; the mask's codes
    layer_pass    every head's map pooled and coded, their similarity, and the output if asked for
    layer_views   what the layer's views show of a pass with the output, kept with the run: coming
                  back to the layer computes nothing (`kept_layer_views`)

Weighted by what each key writes (`explorer.views.weighting`), a block's rows are weighted and
normalised before they are pooled: the largest share in each cell, as the whole maps would show it.

A head's stages take one product q·kᵀ per block (the one attention's rows, `Projections.rows`), and
one softmax over the keys its queries may see.
The scaled map's cells follow from the scores' (rounding is monotone: the largest of float32(s·c) is
float32(largest s · c), and so for the smallest); the masked map's are the scaled ones below the
diagonal, gaps above it, and on it the bounds of the keys each cell's queries may see (in a sliding
layer, the bounds of each cell's keys within the band, from the block's scores).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

import numpy as np
import torch

from explorer.engine import blockwise
from explorer.engine.rows import causal_mask
from explorer.engine.run import Run
from explorer.figures import codec
from explorer.views.agreement import Faithfulness, check_outputs
from explorer.views.weighting import key_shares

Stages = dict[str, np.ndarray | codec.EncodedMap]


def head_stages(
    run: Run, layer: int, head: int, block_bytes: int, weighted: bool = False
) -> tuple[Stages, tuple | np.ndarray]:
    """One head's four maps, encoded as `figures.pipeline_figure` would encode the whole maps, and the
    mask's codes; up to 512 tokens (a block of one) the maps themselves and the mask. `weighted`: the
    pooled softmax is each key's share by what it writes (`weighting.key_shares`); whole maps are
    given as they are, for the view to weight."""
    p, n = run.projections(layer), run.n_tokens
    block = codec.block_for(n, codec.MAP_BUDGET_BYTES)
    if block == 1:  # at most 512 × 512: small enough whole
        whole = blockwise.head_rows(p, head, 0, n)
        return {name: t.numpy() for name, t in whole.items()}, causal_mask(n, window=p.window).numpy()
    cells = math.ceil(n / block)
    highs, lows, diagonal_highs, diagonal_lows, probs_cells, banded = [], [], [], [], [], []
    with torch.inference_mode():
        for start, stop in blockwise.query_blocks(n, 2, block_bytes, block):  # scores and probs rows
            rows = p.rows(range(start, stop), head)
            scores = rows.scores[0]  # [R, N]
            high, low = codec.pool_bounds(scores.numpy(), block)  # [R/b, cells] each
            highs.append(high)
            lows.append(low)
            high, low = _diagonal_bounds(scores[:, start:stop].numpy(), block)  # [R/b] each
            diagonal_highs.append(high)
            diagonal_lows.append(low)
            if p.window is not None:  # a sliding layer: its band's bounds, cell by cell
                banded.append(codec.pool_bounds(scores.masked_fill(~rows.allowed, math.nan).numpy(), block))
            # softmaxed from the scores read (no second product); the keys after the block's last
            # query have probability 0
            probs = rows.probs[0, :, :stop]  # [R, stop]
            if weighted:
                probs = key_shares(probs, p.value_norms[head])[0]
            pooled = pool_max(probs, block)  # [R/b, ceil(stop/b)]
            probs_cells.append(np.pad(pooled, ((0, 0), (0, cells - pooled.shape[-1]))))
    high, low = np.concatenate(highs), np.concatenate(lows)  # [cells, cells]
    below = np.tri(cells, k=-1, dtype=bool)  # every key of the cell allowed
    on = np.eye(cells, dtype=bool)
    masked_high = np.where(below, high, -math.inf).astype(np.float32)
    masked_high[on] = np.concatenate(diagonal_highs)
    masked_low = np.where(below, low, math.inf).astype(np.float32)
    masked_low[on] = np.concatenate(diagonal_lows)
    if banded:
        masked_high = np.concatenate([high for high, _ in banded]).astype(np.float32)
        masked_low = np.concatenate([low for _, low in banded]).astype(np.float32)
    scale = p.scale
    pooled = {
        "scores": codec.most_extreme(high, low),
        "scaled": codec.most_extreme(high * scale, low * scale),
        "masked": codec.most_extreme(masked_high * scale, masked_low * scale),
    }
    scaled_limit = codec.signed_limit(pooled["scaled"])
    encoded = {
        "scores": codec.signed_codes(pooled["scores"], block, codec.signed_limit(pooled["scores"])),
        "scaled": codec.signed_codes(pooled["scaled"], block, scaled_limit),
        "masked": codec.signed_codes(pooled["masked"], block, scaled_limit),
        "probs": codec.probs_codes(np.concatenate(probs_cells), block),
    }
    if p.window is not None:
        return encoded, codec.encode_mask(causal_mask(n, window=p.window).numpy())
    return encoded, codec.causal_mask_codes(n)


def pool_max(maps: torch.Tensor, block: int) -> np.ndarray:
    """`codec.pool(maps, block, "max")` of maps with no gaps (probabilities, shares: every value
    finite), by torch's max pooling: the same values, without the strided passes numpy takes over
    each block's columns. A last block reaching past the map takes the values it holds.
    # [..., R, C] -> [..., ceil(R/b), ceil(C/b)] float32"""
    if block == 1:
        return maps.float().numpy()
    *lead, rows, cols = maps.shape
    flat = maps.float().reshape(-1, rows, cols)  # [B, R, C]
    pooled = torch.nn.functional.max_pool2d(flat, block, ceil_mode=True)
    return pooled.reshape(*lead, *pooled.shape[-2:]).numpy()


def pool_rows(pooled: np.ndarray, maps: torch.Tensor, first: int, block: int) -> None:
    """Max-pool rows `first`.. of maps with no value below 0 (probabilities, shares) into `pooled`, the
    whole maps' b×b cells, in place: a cell the rows cover only in part (the rows start or stop inside
    it, or stop short of its keys) keeps the larger of what it held and what they hold, so blocks of
    rows of any size pool to the whole maps' cells.  # maps [H, R, K ≤ N] -> pooled [H, cells, cells]"""
    rows = maps.shape[-2]
    head = min(-first % block, rows)  # the rows before the first cell boundary they reach
    if head:
        top = maps[:, :head].amax(dim=1, keepdim=True).float()  # [H, 1, K]
        top = torch.nn.functional.max_pool1d(top, block, ceil_mode=True).numpy()  # [H, 1, ceil(K/b)]
        _larger_into(pooled, top, first // block)
    if rows > head:
        _larger_into(pooled, pool_max(maps[:, head:], block), (first + head) // block)


def _larger_into(pooled: np.ndarray, part: np.ndarray, row: int) -> None:
    """The larger of `pooled`'s cells and `part`'s, from cell row `row` and column 0 on.
    # part [H, r, c]"""
    cells = pooled[:, row : row + part.shape[1], : part.shape[2]]
    np.maximum(cells, part, out=cells)


def _diagonal_bounds(square: np.ndarray, block: int) -> tuple[np.ndarray, np.ndarray]:
    """The largest and smallest value each b×b cell on the diagonal of a block's square of scores
    (its queries × the same keys) holds where the causal mask allows it (key ≤ query).
    # [R, R] -> ([ceil(R/b)],) × 2"""
    size = square.shape[0]
    cells = math.ceil(size / block)
    padded = np.pad(square, ((0, cells * block - size), (0, cells * block - size)), constant_values=math.nan)
    on = padded.reshape(cells, block, cells, block)[np.arange(cells), :, np.arange(cells)]  # [cells, b, b]
    allowed = np.tri(block, dtype=bool) & ~np.isnan(on)  # query row ≥ key column
    high = np.where(allowed, on, -math.inf).max(axis=(1, 2))
    low = np.where(allowed, on, math.inf).min(axis=(1, 2))
    return high, low


@dataclass(kw_only=True)
class LayerPass:
    """A layer's views computed block by block, in one pass over its maps."""

    head_maps: np.ndarray | list[codec.EncodedMap]  # every head's map: whole (a few tokens) or coded
    weighted_maps: np.ndarray | list[codec.EncodedMap] | None  # the same of the shares, if asked for
    similarity: torch.Tensor  # [H, H]
    output: torch.Tensor | None  # [N, hidden], if asked for
    seconds: float  # the eager path's time: the projections and the pass


def layer_pass(
    run: Run, layer: int, block_bytes: int, output: bool = True, weighted: bool = False
) -> LayerPass:
    """Every head's map pooled as `figures.all_heads_figure` pools it (and with `weighted`, each key's
    share by what it writes, pooled the same way), their similarity, and the layer's output (as an
    ablated run edits it) if `output`, from one pass over the layer's maps."""
    start = time.perf_counter()
    p, n = run.projections(layer), run.n_tokens
    block = codec.block_for(n, codec.ALL_HEADS_BUDGET_BYTES // p.n_heads)  # as all_heads_figure pools a map
    cells = math.ceil(n / block)
    maps = np.zeros((p.n_heads, cells, cells), dtype=np.float32)  # every value ≥ 0: pooled by the larger
    shares = np.zeros_like(maps) if weighted else None

    def pool(first_query, probs):  # [H, R, stop]
        pool_rows(maps, probs, first_query, block)
        if weighted:
            pool_rows(shares, key_shares(probs, p.value_norms)[0], first_query, block)

    def coded(maps):
        # block 1: the maps themselves (a handful of tokens), for the figure to encode as any map
        return maps if block == 1 else [codec.probs_codes(m, block) for m in maps]

    attn = run.explorer.model.layers[layer].self_attn if output else None
    similarity, out = blockwise.layer_pass(p, block_bytes, attn, pool, run.heads_tap)
    return LayerPass(
        head_maps=coded(maps),
        weighted_maps=coded(shares) if weighted else None,
        similarity=similarity,
        output=out,
        seconds=time.perf_counter() - start,
    )


@dataclass(frozen=True, kw_only=True)
class LayerViews:
    """What a layer's views show of its pass past the budget, as the run keeps it: pooled codes, the
    similarity and the faithfulness check (some 60 KB a layer on SmolLM2 at 2,048 tokens), not the maps."""

    head_maps: np.ndarray | list[codec.EncodedMap]
    similarity: torch.Tensor  # [H, H]
    check: Faithfulness  # the layer's output, from the pass, against the fast path's
    weighted_maps: np.ndarray | list[codec.EncodedMap] | None = None  # once weighted maps were shown

    @property
    def nbytes(self) -> int:
        held = sum(_maps_nbytes(maps) for maps in (self.head_maps, self.weighted_maps))
        return held + self.similarity.numel() * self.similarity.element_size() + self.check.nbytes


def _maps_nbytes(maps: np.ndarray | list[codec.EncodedMap] | None) -> int:
    if maps is None:
        return 0
    return maps.nbytes if isinstance(maps, np.ndarray) else sum(m.z.nbytes for m in maps)


def layer_views(run: Run, layer: int, block_bytes: int, weighted: bool = False) -> LayerViews:
    """The layer's pass with its output, checked against the fast path's output and reduced to what
    the views show; computed once per run and layer, then kept (`Run.memo`). `weighted`: with the
    weighted maps too, from another pass (without the output) if the kept one had none."""

    def compute(kept: LayerViews | None) -> LayerViews:
        if kept is not None:  # kept without the weighted maps asked for now
            passed = layer_pass(run, layer, block_bytes, output=False, weighted=True)
            return replace(kept, weighted_maps=passed.weighted_maps)
        passed = layer_pass(run, layer, block_bytes, weighted=weighted)
        return LayerViews(
            head_maps=passed.head_maps,
            weighted_maps=passed.weighted_maps,
            similarity=passed.similarity,
            check=check_outputs(passed.output, run.sdpa_output(layer), passed.seconds),
        )

    return run.memo(
        ("layer views", layer), compute, stale=lambda kept: weighted and kept.weighted_maps is None
    )


def kept_layer_views(run: Run, layer: int) -> LayerViews | None:
    return run.recalled(("layer views", layer))
